package limits

import (
	"errors"
	"fmt"
	"time"
)

// Limits of one listener; zero values take the defaults (Derive fills
// them in and checks that they can hold).
type Limits struct {
	// PerAddress is the strangers one client address may hold: an IPv4
	// address or an IPv6 /64 (one host usually holds a whole /64), as
	// login.Key counts it. Default 20.
	PerAddress int
	// PerPrefix is the strangers one wider prefix may hold: an IPv4 /24
	// or an IPv6 /48. Without it the holder of an IPv6 /56 (a common
	// home allocation: 256 /64s) or /48 (65,536 of them) would count as
	// that many addresses. Default prefixFactor times PerAddress, at most
	// PreAuthTotal.
	PerPrefix int
	// Total is the connections the listener holds, logged in or not.
	// Default DefaultTotal().
	Total int
	// PreAuthTotal is the strangers the listener holds in all. Total less
	// PreAuthTotal is the share kept for logged-in users, which no number
	// of strangers can take. Default Total/2 (see defaultPreAuthShare).
	PreAuthTotal int
	PreAuthTime  time.Duration // default 30 s
	PreAuthBytes int64         // default 256 KiB

	// Lowered, set by Derive, is the default PerAddress it lowered to fit
	// a low file limit; 0 when it did not.
	Lowered int
}

// Defaults.
const (
	DefaultPerAddress   = 20
	DefaultPreAuthTime  = 30 * time.Second
	DefaultPreAuthBytes = 256 << 10
	// prefixFactor is the per-prefix default in per-address limits: a
	// /24 or /48 gets the room of a few hosts (a clinic's network, an
	// office behind several addresses), not of the 256 or 65,536 it
	// holds.
	prefixFactor = 4
	// defaultPreAuthShare divides Total for the default PreAuthTotal.
	// A real client is a stranger for the second of a TLS handshake and
	// a login, so strangers need little room; half of the listener is
	// still thousands at the usual file limits, and far more than the
	// per-address limit whenever the start-up check passes. The other
	// half stays with the users who have logged in: a flood of strangers
	// can never close the door on them. A smaller share (a tenth) would
	// fall below the per-address limit at modest file limits, where a
	// single clinic's burst of logins would then be refused.
	defaultPreAuthShare = 2
	// maxTotal bounds the default total of one listener.
	maxTotal = 10000
	// minTotal is the default total however low the file limit (the
	// start-up check refuses the limits that result, see Derive).
	minTotal = 16
	// fdHeadroom is the file descriptors kept free of client connections
	// (the state store, the provider's connections, the other listeners'
	// accepts, logs).
	fdHeadroom = 128
	// listeners is how many client listeners share the process's file
	// descriptors (IMAP, IMAPS, SMTP, SMTPS).
	listeners = 4
)

// ErrLimits is wrapped by the errors of Derive: limits that cannot keep
// their promise.
var ErrLimits = errors.New("limits: connection limits cannot hold")

// DefaultTotal is the connections one listener may hold: its share of the
// process's file descriptor limit after a headroom, so that a flood of one
// listener never leaves the others (or /readyz) without a descriptor;
// at most 10,000 (the 1,000 idle users of BENCHMARKS.md fit many times).
func DefaultTotal() int {
	fl, err := CurrentFileLimit()
	if err != nil {
		return maxTotal
	}
	return totalFor(fl.Soft)
}

// totalFor is DefaultTotal for a soft file limit of soft (0: unknown).
func totalFor(soft uint64) int {
	if soft == 0 {
		return maxTotal
	}
	if soft <= fdHeadroom {
		return minTotal
	}
	share := (soft - fdHeadroom) / listeners // unsigned: an infinite limit stays large
	return int(max(minTotal, min(share, maxTotal)))
}

// FileLimitFor is the lowest soft file limit under which the default
// limits hold a per-address limit of perAddress.
func FileLimitFor(perAddress int) uint64 {
	return fileLimitFor(perAddress * defaultPreAuthShare)
}

// fileLimitFor is the soft file limit whose default total is total.
func fileLimitFor(total int) uint64 {
	return uint64(total)*listeners + fdHeadroom
}

// withDefaults fills the zero fields of lim, the total from total().
func (lim Limits) withDefaults(total func() int) Limits {
	if lim.PerAddress <= 0 {
		lim.PerAddress = DefaultPerAddress
	}
	if lim.Total <= 0 {
		lim.Total = total()
	}
	if lim.PreAuthTotal <= 0 {
		lim.PreAuthTotal = max(1, lim.Total/defaultPreAuthShare)
	}
	if lim.PerPrefix <= 0 {
		lim.PerPrefix = max(lim.PerAddress, min(prefixFactor*lim.PerAddress, lim.PreAuthTotal))
	}
	if lim.PreAuthTime <= 0 {
		lim.PreAuthTime = DefaultPreAuthTime
	}
	if lim.PreAuthBytes <= 0 {
		lim.PreAuthBytes = DefaultPreAuthBytes
	}
	return lim
}

// check returns the problems of filled-in limits, each wrapping ErrLimits.
func (lim Limits) check() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrLimits}, args...)...))
	}
	if lim.PreAuthTotal >= lim.Total {
		bad("the pre-login total %d leaves logged-in users none of the listener's %d connections", lim.PreAuthTotal, lim.Total)
	}
	if lim.PreAuthTotal < lim.PerAddress {
		bad("the pre-login total %d is below the per-address limit %d: one client address could take every place before login", lim.PreAuthTotal, lim.PerAddress)
	}
	if lim.PerPrefix < lim.PerAddress {
		bad("the per-prefix limit %d is below the per-address limit %d, which it contains", lim.PerPrefix, lim.PerAddress)
	}
	return errors.Join(errs...)
}

// Derive returns lim with its zero fields set to the defaults for a
// process whose file-descriptor limit is files (a zero Soft: unknown, as
// DefaultTotal), and an error wrapping ErrLimits when the result cannot
// keep its promise: when the pre-login total is below the per-address
// limit (one address could fill it; under `ulimit -n 200` the default
// total is 18), or when it leaves logged-in users no share. A server
// should refuse to start then rather than run with limits an attacker
// can use; Listener takes limits as they are.
//
// A PerAddress left to its default is lowered instead, to half the
// pre-login total, when the file limit is too low for it (under `ulimit
// -n 200`: 4 of 9): the bridge then starts and still keeps one address
// from filling the room before login (and a flood of many addresses is
// displaced by newcomers, see Listener). Only a PerAddress the operator
// set is refused for not fitting. Lowered reports the default it was
// lowered from, for the start-up log.
func Derive(lim Limits, files FileLimit) (Limits, error) {
	in := lim
	lim = lim.withDefaults(func() int { return totalFor(files.Soft) })
	if in.PerAddress <= 0 && lim.check() != nil {
		low := in
		low.PerAddress = max(1, lim.PreAuthTotal/2)
		if l := low.withDefaults(func() int { return totalFor(files.Soft) }); l.check() == nil {
			l.Lowered = lim.PerAddress
			return l, nil
		}
	}
	err := lim.check()
	if err != nil && in.Total <= 0 && files.Soft > 0 {
		// Say what file limit would do, when one would.
		need := max(lim.PerAddress, lim.PreAuthTotal) * defaultPreAuthShare
		if need <= maxTotal && in.withDefaults(func() int { return need }).check() == nil {
			err = fmt.Errorf("%w\nthe file-descriptor limit %d gives each of %d listeners %d connections, %d of them before login; a limit of at least %d would do",
				err, files.Soft, listeners, lim.Total, lim.PreAuthTotal, fileLimitFor(need))
		}
	}
	return lim, err
}
