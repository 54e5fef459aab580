package bridge

import (
	"fmt"

	"github.com/directbridge/directbridge/internal/limits"
)

// connectionLimits derives the connection limits every client listener
// gets. It first raises the process's soft file-descriptor limit to the
// hard one (the listeners' totals are shares of it), then refuses limits
// that cannot keep their promise: a pre-login total below the per-address
// limit (`ulimit -n 200` gives 18 connections per listener, 9 before
// login, fewer than one address may hold) would let a single address shut
// every stranger out, real users on their way to a login included, so
// the bridge would rather not start. The limits go to the log once, so
// that an operator sees what the file limit gave; they hold no secret.
func (b *Bridge) connectionLimits() (limits.Limits, error) {
	before, files, err := limits.RaiseFileLimit()
	if err != nil {
		// Not fatal: the limits derive from what the process has.
		b.log.Warn("file-descriptor limit not raised", "err", err)
		files = before
	}
	lim, err := limits.Derive(limits.Limits{PerAddress: b.cfg.MaxConnsPerAddress, PreAuthTime: b.cfg.PreAuthTimeout}, files)
	if err != nil {
		return lim, fmt.Errorf("%w\nraise the hard file-descriptor limit (ulimit -Hn, systemd LimitNOFILE=) or lower DIRECTBRIDGE_MAX_CONNS_PER_ADDRESS", err)
	}
	attrs := []any{
		"file_limit", files.Soft, "file_limit_hard", files.Hard,
		"listener_total", lim.Total, "pre_login_total", lim.PreAuthTotal,
		"reserved_for_users", lim.Total - lim.PreAuthTotal,
		"per_address", lim.PerAddress, "per_prefix", lim.PerPrefix,
		"address", "IPv4 /32, IPv6 /64", "prefix", "IPv4 /24, IPv6 /48",
		"pre_login_time", lim.PreAuthTime, "pre_login_bytes", lim.PreAuthBytes,
	}
	if before.Soft != files.Soft {
		attrs = append(attrs, "file_limit_raised_from", before.Soft)
	}
	if lim.Lowered > 0 {
		attrs = append(attrs, "per_address_lowered_from", lim.Lowered,
			"file_limit_for_default", limits.FileLimitFor(lim.Lowered))
		b.log.Warn("connection limits lowered: the file-descriptor limit is low; raise the hard limit (ulimit -Hn, systemd LimitNOFILE=)", attrs...)
		return lim, nil
	}
	b.log.Info("connection limits", attrs...)
	return lim, nil
}
