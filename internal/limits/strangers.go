package limits

import (
	"container/list"
	"net/netip"
)

// pool counts a listener's connections: the users (authenticated) and
// the strangers, these by client address and by wider prefix. Its
// methods are called with the listener's mutex held.
//
// A newcomer is a stranger. It is taken while its address and prefix are
// under their limits and the pool has room: strangers < PreAuthTotal
// and all connections < Total. Since PreAuthTotal < Total, strangers can
// never hold the last Total-PreAuthTotal places, which stay with users.
//
// When the room is gone the newcomer is not simply refused, since a real
// user is a stranger too until its login completes, and a flood that
// fills the pool (260 addresses with 20 connections each, reconnecting as
// they are let go) would then keep every user out. Instead it displaces
// the oldest stranger of the most represented prefix, provided that
// prefix holds more strangers than the newcomer's does (so the newcomer's
// prefix never ends with more than the most represented one had). Hence:
//
//   - a flood only ever displaces itself while it holds more per prefix
//     than a user does: a user's single pending login sits in a prefix
//     holding one stranger, and is displaced only when every prefix with
//     strangers holds just one, that is when the flood comes from as many
//     prefixes as there are places for strangers (PreAuthTotal, thousands
//     of /24s or /48s at the default limits; fewer only while users hold
//     more than their reserved share); even then the prefixes that came
//     earlier go first;
//   - the oldest goes, as the stranger that has had the longest to log in
//     and has not; a flood's reconnections make its own connections the
//     newest, not the user's;
//   - no stranger displaces a user: users are not in the pool's lists.
//
// The displaced connection is closed without a word: its protocol may be
// in the middle of a TLS handshake or a reply, where a refusal line would
// be garbage.
type pool struct {
	lim       Limits
	users     int
	strangers int
	perAddr   map[netip.Prefix]int
	groups    map[netip.Prefix]*group
	// byCount[n] lists the groups holding n strangers, in the order they
	// came to hold n; most is the largest n with a group.
	byCount map[int]*list.List
	most    int
}

// group is the strangers of one prefix, oldest first.
type group struct {
	prefix netip.Prefix
	conns  list.List     // of *Conn
	at     *list.Element // this group in byCount[conns.Len()]
}

func newPool(lim Limits) *pool {
	return &pool{lim: lim, perAddr: map[netip.Prefix]int{}, groups: map[netip.Prefix]*group{}, byCount: map[int]*list.List{}}
}

// admit counts c in as a stranger if the limits let it in, and returns
// whether they did and the stranger it displaced, already counted out,
// which the caller closes (nil for none).
func (p *pool) admit(c *Conn) (displaced *Conn, ok bool) {
	held := 0
	if g := p.groups[c.prefix]; g != nil {
		held = g.conns.Len()
	}
	if p.perAddr[c.addr] >= p.lim.PerAddress || held >= p.lim.PerPrefix {
		return nil, false
	}
	if p.strangers >= p.lim.PreAuthTotal || p.users+p.strangers >= p.lim.Total {
		if p.most <= held {
			return nil, false // the newcomer's prefix is among the most represented
		}
		g := p.byCount[p.most].Front().Value.(*group)
		displaced = g.conns.Front().Value.(*Conn)
		p.leave(displaced)
		displaced.counted = false
	}
	p.perAddr[c.addr]++
	g := p.groups[c.prefix]
	if g == nil {
		g = &group{prefix: c.prefix}
		p.groups[c.prefix] = g
	}
	c.elem = g.conns.PushBack(c)
	c.group = g
	p.regroup(g, g.conns.Len()-1)
	p.strangers++
	c.stranger, c.counted = true, true
	return displaced, true
}

// authenticate moves c from the strangers to the users; false when c is
// no longer counted (closed or displaced) or already a user.
func (p *pool) authenticate(c *Conn) bool {
	if !c.counted || !c.stranger {
		return false
	}
	p.leave(c)
	p.users++
	return true
}

// release counts c out, once.
func (p *pool) release(c *Conn) {
	if !c.counted {
		return
	}
	c.counted = false
	if c.stranger {
		p.leave(c)
	} else {
		p.users--
	}
}

// leave counts the stranger c out of the strangers.
func (p *pool) leave(c *Conn) {
	if p.perAddr[c.addr]--; p.perAddr[c.addr] <= 0 {
		delete(p.perAddr, c.addr)
	}
	g := c.group
	g.conns.Remove(c.elem)
	c.elem, c.group, c.stranger = nil, nil, false
	p.regroup(g, g.conns.Len()+1)
	if g.conns.Len() == 0 {
		delete(p.groups, g.prefix)
	}
	p.strangers--
}

// regroup moves g, which held from strangers, to the list of what it
// holds now, and keeps most.
func (p *pool) regroup(g *group, from int) {
	if from > 0 {
		b := p.byCount[from]
		b.Remove(g.at)
		if b.Len() == 0 {
			delete(p.byCount, from)
		}
	}
	g.at = nil
	if n := g.conns.Len(); n > 0 {
		b := p.byCount[n]
		if b == nil {
			b = list.New()
			p.byCount[n] = b
		}
		g.at = b.PushBack(g)
		p.most = max(p.most, n)
	}
	for p.most > 0 && p.byCount[p.most] == nil {
		p.most--
	}
}
