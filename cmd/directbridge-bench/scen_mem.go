package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// medianRSS samples the VmRSS of pid five times, 200 ms apart.
func medianRSS(pid int) (int64, error) {
	var v []int64
	for i := 0; i < 5; i++ {
		rss, _, err := memStatus(pid)
		if err != nil {
			return 0, err
		}
		v = append(v, rss)
		time.Sleep(200 * time.Millisecond)
	}
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	return v[len(v)/2], nil
}

func runConnMem(ctx context.Context, b *bench, out *outcome) error {
	n, k := b.o.connMsgs, b.o.connCount
	s, err := b.seededBridge(ctx, "connmem", n, 0, "DIRECTBRIDGE_IMAP_MAX_CONNECTIONS_PER_USER="+strconv.Itoa(k+10))
	defer s.stop()
	if err != nil {
		return err
	}
	first, err := startIdler(s.br.imapAddr, s.acct)
	if err != nil {
		return err
	}
	defer first.close(true)
	time.Sleep(3 * time.Second)
	rss0, err := medianRSS(s.br.pid())
	if err != nil {
		return err
	}
	xs := make([]*idler, k)
	var next atomic.Int64
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= k || ctx.Err() != nil {
					return
				}
				x, err := startIdler(s.br.imapAddr, s.acct)
				if err != nil {
					firstErr.CompareAndSwap(nil, &err)
					continue
				}
				xs[i] = x
			}
		}()
	}
	wg.Wait()
	defer func() {
		for _, x := range xs {
			if x != nil {
				x.close(true)
			}
		}
	}()
	if p := firstErr.Load(); p != nil {
		return fmt.Errorf("opening %d connections: %w", k, *p)
	}
	connectTime := time.Since(t0)
	time.Sleep(3 * time.Second)
	rss1, err := medianRSS(s.br.pid())
	if err != nil {
		return err
	}
	per := float64(rss1-rss0) / float64(k)
	out.notes = append(out.notes,
		fmt.Sprintf("One user with %d messages in INBOX (sandbox process, seeded by SaveRawMessages); bridge process with DIRECTBRIDGE_IMAP_MAX_CONNECTIONS_PER_USER=%d, otherwise default settings.", n, k+10),
		fmt.Sprintf("A first connection SELECTs INBOX and IDLEs (the folder is loaded); 3 s later the bridge's VmRSS (median of 5 readings) is %s. Then %d more connections LOGIN, SELECT INBOX and IDLE (opened in %s); 3 s later VmRSS is %s.", mib(rss0), k, connectTime.Round(time.Millisecond), mib(rss1)),
		fmt.Sprintf("Per connection: (%s - %s) / %d = %.1f KiB. RSS includes garbage the Go collector has not returned yet, so this is an upper estimate.", mib(rss1), mib(rss0), k, per/1024))
	out.rows[0].measured = fmt.Sprintf("%.1f KiB (%d connections, %d messages)", per/1024, k, n)
	out.rows[0].met = yesNo(per <= 50*1024)
	return nil
}
