// Package cluster lets replicas of the bridge that share one PostgreSQL
// state store act as one bridge (issue 21), with three things PostgreSQL
// gives every replica that can reach it:
//
//   - Membership: each replica writes a heartbeat into the replicas table
//     every HeartbeatInterval; those seen within LiveFor count. The count
//     divides the provider's request budget (the provider sees one
//     bridge). Each replica also holds a life lock (an advisory lock on
//     its heartbeat's connection): Live asks for it, so that a replica
//     killed is dead to the others at once, not a heartbeat later, and
//     an entry it left in the journal of attempts is undecided at once.
//   - Messages (LISTEN/NOTIFY on one channel): a change one replica makes
//     reaches the others, which update their mirrors and their IDLE
//     clients without asking the provider. A replica that may have
//     missed messages (its listening connection broke) is told so, and
//     catches up by its own means.
//   - Leases (session advisory locks on a connection of their own): one
//     replica at a time polls a folder. The lock goes with the
//     connection, so a replica that dies (SIGKILL) lets go of its leases
//     as soon as PostgreSQL sees the connection close.
//
// A bridge without PostgreSQL runs alone: Solo is a cluster of one,
// whose leases are always granted and whose messages go nowhere.
//
// Nothing here carries message content: messages name users, folders,
// UIDs, flags and client addresses, and live in PostgreSQL's notification
// queue only until every listener read them.
package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Timing of the membership.
const (
	// HeartbeatInterval is how often a replica says it is alive.
	HeartbeatInterval = 2 * time.Second
	// LiveFor is how long after its last heartbeat a replica counts: a
	// dead replica's share of the budget returns this long after its last
	// heartbeat. (Live also wants its life lock held.)
	LiveFor = 10 * time.Second
)

// channel is the one NOTIFY channel of the bridge's messages.
const channel = "directbridge"

// MaxPayload bounds what one message may carry: PostgreSQL refuses a
// NOTIFY payload of 8000 bytes or more, and the sender's prefix takes
// some. Senders split what is larger.
const MaxPayload = 7600

// queueLen bounds the messages waiting to go out; past it they are
// dropped and the other replicas are told to catch up instead.
const queueLen = 8192

// Cluster is this replica's membership, messages and leases. The zero
// value is not usable: Open one, or take Solo.
type Cluster struct {
	id   string
	solo bool
	cfg  *pgx.ConnConfig
	log  *slog.Logger

	addr string // where this replica serves what it holds (Options.Addr)

	mu       sync.Mutex
	live     map[string]bool   // replicas alive at the last heartbeat
	addrs    map[string]string // where each serves what it holds, if it does
	handlers map[string]func([]byte)
	missed   []func()
	onShare  []func(int)
	queue    []outgoing
	dropped  bool // messages were dropped: the others must catch up
	wake     chan struct{}

	lifeConn *pgx.Conn // the heartbeat's connection, holding the life lock (beat's own)

	lmu   sync.Mutex // the lease connection and held
	lconn *pgx.Conn
	held  map[int64]bool

	stop      chan struct{}
	listening chan struct{} // closed once the first LISTEN is in place
	wg        sync.WaitGroup
}

type outgoing struct {
	topic   string
	payload []byte
}

// newID names a replica for as long as its process lives.
func newID() string {
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go 1.24)
	return hex.EncodeToString(b[:])
}

// Solo returns the cluster of one replica: the bridge on SQLite, or on
// PostgreSQL when run as one process.
func Solo() *Cluster {
	id := newID()
	return &Cluster{id: id, solo: true, live: map[string]bool{id: true}, handlers: map[string]func([]byte){}}
}

// Options are a replica's settings in the cluster.
type Options struct {
	// Addr is where this replica serves the messages it holds in memory
	// to the others (internal/peerfetch), written with its heartbeat;
	// empty: it serves none.
	Addr string
	// Log receives the cluster's warnings; nil: none.
	Log *slog.Logger
}

// Open joins the cluster of the replicas sharing the PostgreSQL database
// at url (the state store's; its migrations 11 and 12 made the replicas
// table): a first heartbeat, then the heartbeat, the listener and the
// sender run until Close.
func Open(ctx context.Context, url string, opts Options) (*Cluster, error) {
	log := opts.Log
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	cfg.RuntimeParams["search_path"] = "directbridge, public"
	// A replica lost without closing its connections (a node's power, a
	// partition) must not hold its life lock and leases for the two hours
	// of the server's default TCP keepalive: PostgreSQL gives up on these
	// connections within about 15 s (settable per session).
	cfg.RuntimeParams["tcp_keepalives_idle"] = "5"
	cfg.RuntimeParams["tcp_keepalives_interval"] = "2"
	cfg.RuntimeParams["tcp_keepalives_count"] = "3"
	cfg.RuntimeParams["tcp_user_timeout"] = "15000"
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Cluster{id: newID(), addr: opts.Addr, cfg: cfg, log: log, live: map[string]bool{}, addrs: map[string]string{}, handlers: map[string]func([]byte){},
		wake: make(chan struct{}, 1), held: map[int64]bool{}, stop: make(chan struct{}), listening: make(chan struct{})}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster: connecting: %w", err)
	}
	if err := c.heartbeat(ctx, conn); err != nil {
		conn.Close(ctx)
		return nil, err
	}
	c.wg.Add(2)
	go c.send()
	go c.listen()
	// Back once this replica hears the others and announced itself: a
	// change published after Open returned elsewhere reaches it once the
	// others read the announcement (a replica alone publishes nothing).
	// What they changed before that, in the moment it took, is caught up
	// with (the handlers' missed) a little later, when they surely did.
	select {
	case <-c.listening:
		// The others count this replica at once, not at their next
		// heartbeat.
		// With the address it serves the others at: their director
		// sends this replica's users here from now on, not after a
		// heartbeat during which each replica would choose otherwise.
		if _, err := conn.Exec(ctx, `SELECT pg_notify($1, $2)`, channel, c.id+" "+joinedTopic+" 0 "+c.addr); err != nil {
			c.log.Warn("cluster: announcing this replica failed; the others count it at their next heartbeat", "err", err)
		}
		c.wg.Add(2)
		go c.beat(conn)
		go func() {
			defer c.wg.Done()
			select {
			case <-time.After(HeartbeatInterval):
				c.missedAll()
			case <-c.stop:
			}
		}()
		return c, nil
	case <-ctx.Done():
		conn.Close(context.Background())
		c.Close()
		return nil, fmt.Errorf("cluster: listening: %w", ctx.Err())
	}
}

// ID names this replica: the owner of its entries in the journal of
// attempts.
func (c *Cluster) ID() string { return c.id }

// Addr returns where replica id serves the messages it holds in memory,
// as its last heartbeat said; false when it serves none or is not known
// alive.
func (c *Cluster) Addr(id string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.addrs[id]
	return a, ok
}

// Members returns this replica's id and the live replicas that serve
// the others (Options.Addr), by id with their address, as the last
// heartbeat saw them; this replica is among them when it serves.
func (c *Cluster) Members() (self string, addrs map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	addrs = make(map[string]string, len(c.addrs)+1)
	for id, a := range c.addrs {
		addrs[id] = a
	}
	if c.addr != "" {
		addrs[c.id] = c.addr
	}
	return c.id, addrs
}

// Live reports whether the replica id is alive now: whether it holds its
// life lock, which PostgreSQL lets go of as soon as the replica's
// connection closes (a SIGKILL closes it at once), where a heartbeat
// would take LiveFor to tell. This replica always is. When PostgreSQL
// cannot be asked the answer is no: the caller then treats the
// replica's unfinished work as undecided, which delays a retry but never
// repeats a change.
func (c *Cluster) Live(ctx context.Context, id string) bool {
	if id == c.id {
		return true
	}
	if c.solo {
		return false
	}
	k := lifeKey(id)
	c.lmu.Lock()
	defer c.lmu.Unlock()
	if err := c.leaseConnLocked(ctx); err != nil {
		return false
	}
	// Alive: holds its life lock, and its heartbeat is recent (a replica
	// whose node was lost may hold the lock until PostgreSQL gives up on
	// its connection).
	var free, beating bool
	if err := c.lconn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1),
		EXISTS (SELECT 1 FROM replicas WHERE id = $2 AND seen_at > `+nowMillis+` - $3)`, k, id, LiveFor.Milliseconds()).Scan(&free, &beating); err != nil {
		c.dropLeasesLocked()
		return false
	}
	if free {
		if _, err := c.lconn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, k); err != nil {
			c.dropLeasesLocked()
		}
		return false
	}
	return beating
}

// DiedBy returns when the replica id, not alive, died at the latest: a
// heartbeat interval after its last heartbeat (by PostgreSQL's clock, as
// this replica's clock reads it). ok is false when that is not known (it
// left, or never beat).
func (c *Cluster) DiedBy(ctx context.Context, id string) (at time.Time, ok bool) {
	if c.solo {
		return time.Time{}, false
	}
	c.lmu.Lock()
	defer c.lmu.Unlock()
	if err := c.leaseConnLocked(ctx); err != nil {
		return time.Time{}, false
	}
	var seen, now int64
	err := c.lconn.QueryRow(ctx, `SELECT seen_at, `+nowMillis+` FROM replicas WHERE id = $1`, id).Scan(&seen, &now)
	if err != nil {
		return time.Time{}, false
	}
	ago := time.Duration(now-seen) * time.Millisecond
	return time.Now().Add(-ago).Add(HeartbeatInterval), true
}

// lifeKey is the advisory lock a replica holds for as long as it lives.
func lifeKey(id string) int64 { return leaseKey("replica\x00" + id) }

// leaseConnLocked connects the lease connection if it is not. Called
// with lmu held.
func (c *Cluster) leaseConnLocked(ctx context.Context) error {
	if c.lconn != nil && !c.lconn.IsClosed() {
		return nil
	}
	clear(c.held)
	conn, err := pgx.ConnectConfig(ctx, c.cfg)
	if err != nil {
		return err
	}
	c.lconn = conn
	return nil
}

// Replicas is the number of replicas alive, this one included.
func (c *Cluster) Replicas() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return max(len(c.live), 1)
}

// OnShare calls f with the number of live replicas now and whenever it
// changes (the provider budget's share, upstream.Budget.SetShare).
func (c *Cluster) OnShare(f func(replicas int)) {
	c.mu.Lock()
	c.onShare = append(c.onShare, f)
	n := max(len(c.live), 1)
	c.mu.Unlock()
	f(n)
}

// Handle calls f with the payload of every message on topic another
// replica publishes, one at a time and in the order they were sent, and
// missed whenever messages may have been lost (the listening connection
// broke): the receiver then catches up from the state store or the
// provider. Set handlers before messages flow (at start).
func (c *Cluster) Handle(topic string, f func(payload []byte), missed func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.handlers[topic] = f
	if missed != nil {
		c.missed = append(c.missed, missed)
	}
}

// Publish sends payload on topic to the other replicas, without waiting:
// messages go out in the order published. Payloads over MaxPayload are
// the caller's to split; one is dropped with a warning. A payload must
// not hold a newline (JSON does not).
//
// While the replica is alone nothing is sent (no one would hear it); a
// replica that joins catches up on its own (Open).
func (c *Cluster) Publish(topic string, payload []byte) {
	if c.solo || c.Replicas() == 1 {
		return
	}
	c.mu.Lock()
	if len(payload) > MaxPayload {
		// Not sent: the others must catch up instead.
		c.log.Warn("cluster: message too large, not sent; the other replicas catch up", "topic", topic, "bytes", len(payload))
		c.dropped = true
	} else if len(c.queue) >= queueLen {
		c.dropped = true
	} else {
		c.queue = append(c.queue, outgoing{topic, payload})
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Lease reports whether this replica may poll what key names now: it
// holds the lease or just took it. Leases are held until Release or
// until the lease connection breaks (then every replica may take them
// again). When PostgreSQL cannot be asked the answer is yes: a folder
// polled twice costs calls, one polled by nobody loses mail's arrival.
func (c *Cluster) Lease(ctx context.Context, key string) bool {
	if c.solo {
		return true
	}
	k := leaseKey(key)
	c.lmu.Lock()
	defer c.lmu.Unlock()
	if err := c.leaseConnLocked(ctx); err != nil {
		return true
	}
	if c.held[k] {
		return true
	}
	var ok bool
	if err := c.lconn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, k).Scan(&ok); err != nil {
		c.dropLeasesLocked()
		return true
	}
	if ok {
		c.held[k] = true
	}
	return ok
}

// Release lets go of the lease of key, if held.
func (c *Cluster) Release(key string) {
	if c.solo {
		return
	}
	k := leaseKey(key)
	c.lmu.Lock()
	defer c.lmu.Unlock()
	if !c.held[k] {
		return
	}
	delete(c.held, k)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.lconn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, k); err != nil {
		c.dropLeasesLocked()
	}
}

// dropLeasesLocked closes the lease connection, which lets go of every
// lease. Called with lmu held.
func (c *Cluster) dropLeasesLocked() {
	if c.lconn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c.lconn.Close(ctx)
		cancel()
	}
	c.lconn = nil
	clear(c.held)
}

// leaseKey maps a lease's name to an advisory lock key: 64 bits of
// FNV-1a, so that two folders sharing one (and so one poller, and
// perhaps none) is as good as impossible. The bigint key space of the
// state store's own locks holds two fixed keys only.
func leaseKey(key string) int64 {
	h := fnv.New64a()
	h.Write([]byte("lease\x00"))
	h.Write([]byte(key))
	return int64(h.Sum64())
}

// nowMillis is PostgreSQL's clock in Unix milliseconds: every replica's
// heartbeat is timed by the one clock, whatever the replicas' own.
const nowMillis = `(extract(epoch FROM clock_timestamp()) * 1000)::bigint`

// heartbeat writes this replica's heartbeat and reads who is alive.
// The heartbeat's connection holds the replica's life lock (Live), taken
// on each new connection.
func (c *Cluster) heartbeat(ctx context.Context, conn *pgx.Conn) error {
	if c.lifeConn != conn {
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, lifeKey(c.id)); err != nil {
			return fmt.Errorf("cluster: life lock: %w", err)
		}
		c.lifeConn = conn
	}
	// The life lock's key goes with the heartbeat: the journal of
	// attempts asks PostgreSQL whether an entry's owner holds it in the
	// statement that finds the entry (state.ownerLiveSQL).
	if _, err := conn.Exec(ctx, `INSERT INTO replicas (id, started_at, seen_at, addr, life_key, life_pid) VALUES ($1, `+nowMillis+`, `+nowMillis+`, $2, $3, pg_backend_pid())
ON CONFLICT (id) DO UPDATE SET seen_at = EXCLUDED.seen_at, addr = EXCLUDED.addr, life_key = EXCLUDED.life_key, life_pid = EXCLUDED.life_pid`, c.id, c.addr, lifeKey(c.id)); err != nil {
		return fmt.Errorf("cluster: heartbeat: %w", err)
	}
	// Replicas gone for an hour are forgotten (one that stopped cleanly
	// removed itself).
	if _, err := conn.Exec(ctx, `DELETE FROM replicas WHERE seen_at < `+nowMillis+` - 3600000`); err != nil {
		return fmt.Errorf("cluster: heartbeat: %w", err)
	}
	rows, err := conn.Query(ctx, `SELECT id, addr FROM replicas WHERE seen_at > `+nowMillis+` - $1`, LiveFor.Milliseconds())
	if err != nil {
		return fmt.Errorf("cluster: heartbeat: %w", err)
	}
	type member struct{ ID, Addr string }
	members, err := pgx.CollectRows(rows, pgx.RowToStructByPos[member])
	if err != nil {
		return fmt.Errorf("cluster: heartbeat: %w", err)
	}
	live := map[string]bool{c.id: true}
	addrs := map[string]string{}
	for _, m := range members {
		live[m.ID] = true
		if m.Addr != "" && m.ID != c.id {
			addrs[m.ID] = m.Addr
		}
	}
	c.mu.Lock()
	changed := len(live) != len(c.live)
	c.live = live
	c.addrs = addrs
	fs := c.onShare
	c.mu.Unlock()
	if changed {
		for _, f := range fs {
			f(len(live))
		}
	}
	return nil
}

// beat writes the heartbeat every HeartbeatInterval on conn, and checks
// the lease connection on the way: leases on a connection that broke are
// gone (another replica may hold them now). A failed heartbeat keeps the
// last membership: the budget's share stays as it was.
func (c *Cluster) beat(conn *pgx.Conn) {
	defer c.wg.Done()
	t := time.NewTicker(HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if conn != nil && !conn.IsClosed() {
				// Leave at once: the others' shares grow now, not LiveFor later.
				conn.Exec(ctx, `DELETE FROM replicas WHERE id = $1`, c.id)
				conn.Close(ctx)
			}
			cancel()
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), HeartbeatInterval)
		if conn == nil || conn.IsClosed() {
			conn, _ = pgx.ConnectConfig(ctx, c.cfg)
		}
		if conn != nil {
			// A failed statement keeps the connection, and with it the
			// life lock; one that broke is made again at the next beat.
			if err := c.heartbeat(ctx, conn); err != nil {
				c.log.Warn("cluster: heartbeat failed", "err", err)
			}
			if conn.IsClosed() {
				conn = nil
			}
		}
		c.lmu.Lock()
		if c.lconn != nil && c.lconn.Ping(ctx) != nil {
			c.dropLeasesLocked()
		}
		c.lmu.Unlock()
		cancel()
	}
}

// send publishes the queued messages, in order, in batches of one round
// trip each.
func (c *Cluster) send() {
	defer c.wg.Done()
	var conn *pgx.Conn
	var seq uint64
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	for {
		select {
		case <-c.stop:
			return
		case <-c.wake:
		}
		for {
			c.mu.Lock()
			n := min(len(c.queue), 256)
			batch := c.queue[:n:n]
			c.queue = c.queue[n:]
			dropped := c.dropped
			c.dropped = false
			c.mu.Unlock()
			if dropped {
				batch = append(batch, outgoing{topic: missedTopic})
			}
			if len(batch) == 0 {
				break
			}
			var b pgx.Batch
			for len(batch) > 0 {
				// Consecutive messages of a topic travel in one
				// notification, a line each, up to MaxPayload: one
				// statement for many changes. seq keeps two equal
				// notifications from being folded into one (PostgreSQL
				// delivers one of identical ones in a transaction).
				topic := batch[0].topic
				var body strings.Builder
				n := 0
				for n < len(batch) && batch[n].topic == topic && (n == 0 || body.Len()+1+len(batch[n].payload) <= MaxPayload) {
					if n > 0 {
						body.WriteByte('\n')
					}
					body.Write(batch[n].payload)
					n++
				}
				batch = batch[n:]
				seq++
				b.Queue(`SELECT pg_notify($1, $2)`, channel, c.id+" "+topic+" "+strconv.FormatUint(seq, 36)+" "+body.String())
			}
			err := c.sendBatch(&conn, &b)
			if err != nil {
				c.log.Warn("cluster: publishing failed; the other replicas catch up", "notifications", b.Len(), "err", err)
				c.mu.Lock()
				c.dropped = true
				c.mu.Unlock()
				select {
				case <-c.stop:
					return
				case <-time.After(time.Second):
				}
			}
		}
	}
}

// sendBatch sends b on *conn, connecting first if needed.
func (c *Cluster) sendBatch(conn **pgx.Conn, b *pgx.Batch) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if *conn == nil || (*conn).IsClosed() {
		nc, err := pgx.ConnectConfig(ctx, c.cfg)
		if err != nil {
			return err
		}
		*conn = nc
	}
	if err := (*conn).SendBatch(ctx, b).Close(); err != nil {
		(*conn).Close(ctx)
		*conn = nil
		return err
	}
	return nil
}

// missedTopic tells every receiver to catch up: messages were dropped.
// joinedTopic announces a replica that just joined.
const (
	missedTopic = "!missed"
	joinedTopic = "!joined"
)

// listen receives the other replicas' messages until Close, connecting
// again after a break (and telling the handlers they may have missed
// some).
func (c *Cluster) listen() {
	defer c.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-c.stop
		cancel()
	}()
	backoff := 100 * time.Millisecond
	first := true
	for ctx.Err() == nil {
		err := c.listenOnce(ctx, &first)
		if ctx.Err() != nil {
			return
		}
		c.log.Warn("cluster: listening failed; connecting again", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// listenOnce listens on one connection until it breaks.
func (c *Cluster) listenOnce(ctx context.Context, first *bool) error {
	conn, err := pgx.ConnectConfig(ctx, c.cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `LISTEN `+channel); err != nil {
		return err
	}
	if *first {
		close(c.listening)
	} else {
		c.missedAll()
	}
	*first = false
	for {
		// A connection that died without a word (half open) would wait
		// for ever: every listenPing of silence it is asked a query.
		wctx, cancel := context.WithTimeout(ctx, listenPing)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err = conn.Exec(pctx, `SELECT 1`)
			cancel()
			if err != nil {
				return err
			}
			continue
		}
		c.dispatch(n.Payload)
	}
}

// listenPing is the silence after which the listening connection is
// checked.
const listenPing = 30 * time.Second

// dispatch hands one message to its topic's handler; this replica's
// own messages are not handed back.
func (c *Cluster) dispatch(msg string) {
	sender, rest, _ := strings.Cut(msg, " ")
	topic, rest, _ := strings.Cut(rest, " ")
	_, payload, _ := strings.Cut(rest, " ")
	if sender == c.id {
		return
	}
	switch topic {
	case missedTopic:
		c.missedAll()
		return
	case joinedTopic:
		c.mu.Lock()
		fresh := !c.live[sender]
		c.live[sender] = true
		if payload != "" {
			c.addrs[sender] = payload
		}
		n, fs := len(c.live), c.onShare
		c.mu.Unlock()
		if fresh {
			for _, f := range fs {
				f(n)
			}
		}
		return
	}
	c.mu.Lock()
	f := c.handlers[topic]
	c.mu.Unlock()
	if f == nil {
		return
	}
	for len(payload) > 0 {
		line, rest, _ := strings.Cut(payload, "\n")
		f([]byte(line))
		payload = rest
	}
}

func (c *Cluster) missedAll() {
	c.mu.Lock()
	fs := c.missed
	c.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// Close leaves the cluster: the heartbeat row is removed (the others'
// shares grow at their next heartbeat), the life lock and the leases are
// let go, the goroutines end.
func (c *Cluster) Close() error {
	if c.solo {
		return nil
	}
	select {
	case <-c.stop:
		return errors.New("cluster: closed twice")
	default:
	}
	close(c.stop)
	c.wg.Wait()
	c.lmu.Lock()
	c.dropLeasesLocked()
	c.lmu.Unlock()
	return nil
}
