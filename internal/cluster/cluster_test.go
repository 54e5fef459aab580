package cluster_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/directbridge/directbridge/internal/cluster"
	"github.com/directbridge/directbridge/internal/pgtest"
	"github.com/directbridge/directbridge/internal/state"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// join opens n replicas of one cluster on a fresh database, its schema
// made by the state store as the bridge does.
func join(t *testing.T, n int) []*cluster.Cluster {
	t.Helper()
	url := pgtest.Database(t)
	s, err := state.OpenPostgres(url)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	var cs []*cluster.Cluster
	for range n {
		c, err := cluster.Open(context.Background(), url, cluster.Options{Addr: fmt.Sprintf("127.0.0.1:%d", 7000+len(cs))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		cs = append(cs, c)
	}
	return cs
}

// eventually waits up to d for ok.
func eventually(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !ok() {
		if time.Now().After(end) {
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMembership: replicas see each other at once (the announcement),
// share the budget by their count, and one that leaves is dead to the
// others at once and gone from their count at their next heartbeat.
func TestMembership(t *testing.T) {
	cs := join(t, 2)
	a, b := cs[0], cs[1]
	var mu sync.Mutex
	shares := []int{}
	a.OnShare(func(n int) { mu.Lock(); shares = append(shares, n); mu.Unlock() })
	eventually(t, 2*cluster.HeartbeatInterval+time.Second, "two replicas seen by the first", func() bool { return a.Replicas() == 2 })
	ctx := context.Background()
	if !a.Live(ctx, b.ID()) || !b.Live(ctx, a.ID()) {
		t.Fatal("each replica sees the other alive")
	}
	if a.Live(ctx, "someone-else") {
		t.Fatal("an unknown replica is alive")
	}
	eventually(t, 2*cluster.HeartbeatInterval+time.Second, "the second's address known to the first", func() bool {
		addr, ok := a.Addr(b.ID())
		return ok && addr == "127.0.0.1:7001"
	})
	if _, ok := a.Addr(a.ID()); ok {
		t.Fatal("a replica lists its own address among the others'")
	}
	b.Close()
	// Dead at once, not a heartbeat later: its life lock went with its
	// connection.
	if a.Live(ctx, b.ID()) {
		t.Fatal("a replica that left is still alive")
	}
	eventually(t, 2*cluster.HeartbeatInterval+time.Second, "the first alone again", func() bool { return a.Replicas() == 1 })
	mu.Lock()
	defer mu.Unlock()
	if shares[len(shares)-1] != 1 || !containsInt(shares, 2) {
		t.Fatalf("budget shares told: %v, want 2 then 1", shares)
	}
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// TestMessagesInOrder: what one replica publishes reaches the other in
// order, equal payloads included (many travel in one notification), and
// never comes back to its sender.
func TestMessagesInOrder(t *testing.T) {
	cs := join(t, 2)
	a, b := cs[0], cs[1]
	var mu sync.Mutex
	var got, back []string
	b.Handle("t", func(p []byte) { mu.Lock(); got = append(got, string(p)); mu.Unlock() }, nil)
	a.Handle("t", func(p []byte) { mu.Lock(); back = append(back, string(p)); mu.Unlock() }, nil)
	// A replica alone publishes nothing: the sender waits to know the
	// other (a heartbeat).
	eventually(t, 2*cluster.HeartbeatInterval+time.Second, "the sender knows the receiver", func() bool { return a.Replicas() == 2 })
	want := []string{"one", "two", "two", "three"}
	for i := 0; i < 300; i++ {
		want = append(want, "n"+strconv.Itoa(i%7))
	}
	for _, p := range want {
		a.Publish("t", []byte(p))
	}
	eventually(t, 5*time.Second, "every message received", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) >= len(want) })
	mu.Lock()
	defer mu.Unlock()
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("message %d = %q, want %q (order lost)", i, got[i], want[i])
		}
	}
	if len(back) != 0 {
		t.Fatalf("the sender got its own messages: %v", back[:1])
	}
}

// TestLeaseOneHolder: a lease is held by one replica at a time, and
// passes on when its holder releases it or dies (its connection closes).
func TestLeaseOneHolder(t *testing.T) {
	cs := join(t, 2)
	a, b := cs[0], cs[1]
	ctx := context.Background()
	if !a.Lease(ctx, "u/INBOX") {
		t.Fatal("the first asker gets the lease")
	}
	if !a.Lease(ctx, "u/INBOX") {
		t.Fatal("the holder keeps it")
	}
	if b.Lease(ctx, "u/INBOX") {
		t.Fatal("a second replica got a held lease")
	}
	if !b.Lease(ctx, "u/Sent") {
		t.Fatal("another folder's lease is free")
	}
	a.Release("u/INBOX")
	if !b.Lease(ctx, "u/INBOX") {
		t.Fatal("a released lease is not taken over")
	}
	if a.Lease(ctx, "u/INBOX") {
		t.Fatal("two holders")
	}
	b.Close() // as a replica that dies: its connections close
	eventually(t, 5*time.Second, "the dead holder's lease taken over", func() bool { return a.Lease(ctx, "u/INBOX") })
}

// TestSolo: a replica alone holds every lease and hears nothing.
func TestSolo(t *testing.T) {
	s := cluster.Solo()
	if !s.Lease(context.Background(), "x") || s.Replicas() != 1 || !s.Live(context.Background(), s.ID()) {
		t.Fatal("solo: leases granted, one replica, itself alive")
	}
	s.Publish("t", []byte("nobody hears"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLiveForAgrees: the journal of attempts judges an owner's heartbeat
// by the same span as the cluster.
func TestLiveForAgrees(t *testing.T) {
	if cluster.LiveFor != state.ReplicaLiveFor {
		t.Fatalf("cluster.LiveFor %v, state.ReplicaLiveFor %v", cluster.LiveFor, state.ReplicaLiveFor)
	}
}

// TestAttemptsSeeOwnersLife: the journal of attempts reads a replica's
// life from what its heartbeat wrote (the life lock's key): alive while
// it runs, dead once it left.
func TestAttemptsSeeOwnersLife(t *testing.T) {
	url := pgtest.Database(t)
	st, err := state.OpenPostgres(url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := cluster.Open(context.Background(), url, cluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, _, err := st.BeginUnlessUndecided(ctx, "alice@direct.example", "append:x", c.ID(), 0); err != nil {
		t.Fatal(err)
	}
	live := func() state.Liveness {
		_, found, err := st.BeginUnlessUndecided(ctx, "alice@direct.example", "append:x", "another", 0)
		if err != nil || len(found) != 1 {
			t.Fatalf("found %+v, %v; want the replica's attempt", found, err)
		}
		return found[0].OwnerLive
	}
	if got := live(); got != state.OwnerAlive {
		t.Fatalf("the running replica's attempt: liveness %d, want alive", got)
	}
	c.Close()
	if got := live(); got != state.OwnerDead {
		t.Fatalf("the closed replica's attempt: liveness %d, want dead", got)
	}
}
