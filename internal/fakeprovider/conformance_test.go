package fakeprovider_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/directbridge/directbridge/internal/fakeprovider"
	"github.com/directbridge/directbridge/restclient"
	"github.com/directbridge/directbridge/sandbox"
	"github.com/directbridge/directbridge/upstream"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// TestConformsToTheSandbox runs the same random operations against the
// sandbox (over HTTP, through restclient.Upstream) and the fake, and
// wants the same answers: the same error class and provider text, the
// same UIDs, counts, bytes, read states, folders and message fields
// (received dates aside: the two clocks differ).
func TestConformsToTheSandbox(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { conform(t, seed) })
	}
}

func conform(t *testing.T, seed uint64) {
	sb, err := sandbox.Open(sandbox.Options{Users: []sandbox.Account{{Name: alice, Password: alicePW}}})
	must(t, err)
	defer sb.Close()
	hs := httptest.NewServer(sb)
	defer hs.Close()
	c, err := restclient.New(restclient.Options{BaseURL: hs.URL, MaxRetries: -1, RateLimit: restclient.Unlimited})
	must(t, err)
	real := restclient.Upstream(c)
	fake := fakeprovider.New(fakeprovider.Options{Users: map[string]string{alice: alicePW}})

	rng := rand.New(rand.NewPCG(seed, 2))
	folders := []string{"INBOX", "INBOX.Work", "INBOX.Trash", "INBOX.Work.Q3", "INBOX.Sent", "INBOX.Nope", "Work"}
	folder := func() string { return folders[rng.IntN(len(folders))] }
	uidList := func() []int64 {
		var out []int64
		for range rng.IntN(4) {
			out = append(out, int64(1+rng.IntN(8)))
		}
		return out
	}
	n := 0
	type answer struct {
		Class, Text string
		Value       any
	}
	ask := func(p upstream.Provider, op int, args []any) answer {
		var v any
		var err error
		a := aliceAuth
		switch op {
		case 0:
			err = p.Save(ctx, a, args[0].(string), args[1].([][]byte))
		case 1:
			v, err = p.UIDs(ctx, a, args[0].(string))
		case 2:
			var n, u int
			n, err = p.Count(ctx, a, args[0].(string))
			if err == nil {
				u, err = p.UnreadCount(ctx, a, args[0].(string))
			}
			v = [2]int{n, u}
		case 3:
			err = p.SetRead(ctx, a, args[0].(string), args[1].([]int64), args[2].(bool))
		case 4:
			err = p.Copy(ctx, a, args[0].(string), args[1].(string), args[2].([]int64))
		case 5:
			err = p.Move(ctx, a, args[0].(string), args[1].(string), args[2].([]int64))
		case 6:
			err = p.Delete(ctx, a, args[0].(string), args[1].([]int64), args[2].(bool))
		case 7:
			var raws map[int64][]byte
			raws, err = p.Raw(ctx, a, args[0].(string), args[1].([]int64))
			v = raws
		case 8:
			var ds []directapi.MessageDetail
			ds, err = p.Messages(ctx, a, args[0].(string), args[1].([]int64))
			v = comparable(ds)
		case 9:
			var ds []directapi.MessageDetail
			ds, err = p.Metadata(ctx, a, args[0].(string))
			v = comparable(ds)
		case 10:
			var ds []directapi.MessageDetail
			ds, err = p.Unread(ctx, a, args[0].(string))
			v = comparable(ds)
		case 11:
			err = p.CreateFolder(ctx, a, args[0].(string))
		case 12:
			err = p.RenameFolder(ctx, a, args[0].(string), args[1].(string))
		case 13:
			err = p.DeleteFolder(ctx, a, args[0].(string))
		case 14:
			v, err = p.Folders(ctx, a, args[0].(string), args[1].(bool))
		case 15:
			err = p.SetSubscribed(ctx, a, []string{args[0].(string)}, args[1].(bool))
		}
		if err != nil {
			return answer{Class: classOf(err), Text: upstream.ProviderMessage(err)}
		}
		return answer{Value: v}
	}
	for step := range 1000 {
		op := rng.IntN(16)
		var args []any
		switch op {
		case 0:
			var raws [][]byte
			for range 1 + rng.IntN(2) {
				n++
				raws = append(raws, msg(n))
			}
			args = []any{folder(), raws}
		case 1, 2, 9, 10, 11, 13:
			args = []any{folder()}
		case 3, 6:
			args = []any{folder(), uidList(), rng.IntN(2) == 0}
		case 4, 5:
			args = []any{folder(), folder(), uidList()}
		case 7, 8:
			args = []any{folder(), uidList()}
		case 12:
			args = []any{folder(), folder()}
		case 14, 15:
			args = []any{folder(), rng.IntN(2) == 0}
		}
		want, got := ask(real, op, args), ask(fake, op, args)
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("step %d, operation %d %v:\nsandbox %+v\nfake    %+v", step, op, args, want, got)
		}
	}
}

// classOf names the sentinel class of err.
func classOf(err error) string {
	for _, c := range []error{upstream.ErrAuth, upstream.ErrAddress, upstream.ErrNotFound, upstream.ErrReserved,
		upstream.ErrRefused, upstream.ErrTemporary, upstream.ErrUnknownOutcome} {
		if errors.Is(err, c) {
			return c.Error()
		}
	}
	return fmt.Sprintf("unclassified: %v", err)
}

// comparable drops what differs between two providers with two clocks.
func comparable(ds []directapi.MessageDetail) []directapi.MessageDetail {
	out := make([]directapi.MessageDetail, len(ds))
	for i, d := range ds {
		d.ReceivedDate = directapi.Date{}
		out[i] = d
	}
	return out
}
