package upstream

import (
	"context"
	"strings"
	"time"

	"github.com/directbridge/directbridge/upstream/directapi"
)

// The budget counts HTTP requests, not Provider calls. One call may send
// several: the REST client splits long UID, smtpId and message lists into
// batches (Raw, Messages, Save, Status, the UID operations), retries reads
// after a 5xx or a transport failure and any request after a 429, and a
// registration call logs in first. Charging such a call one token would
// let the bridge exceed the rate it promises the provider by as many
// times.
//
// So the budget travels in the context (Charge), and the one that sends
// the requests waits for it before each (Pace): restclient's Client does,
// for every attempt of every request, with whatever context it is given,
// so callers that use the Client without a Provider are charged too (the
// admin socket: admin.Config.Budget).
// WithBudget charges a Provider that says it paces itself
// (RequestPacer, as restclient.Upstream does) through the context only;
// any other Provider (a test's fake) one token per call, before it, as
// there is no knowing what it sends. Priorities (WithPriority) and
// prepaid requests (Budget.Prepay) work as before, per request: the
// first n requests made with a prepaid context go without waiting again,
// whichever calls make them, and the rest wait at the context's priority.

// WithBudget returns p with every request first waiting for b (see
// Budget): one token per HTTP request when p is a RequestPacer, else one
// per call. The callers mark background work with WithPriority. A nil or
// unlimited b returns p itself.
func WithBudget(p Provider, b *Budget) Provider {
	if b == nil || b.Rate() == 0 {
		return p
	}
	rp, ok := p.(RequestPacer)
	return budgeted{p: p, b: b, paced: ok && rp.PacesRequests()}
}

// RequestPacer is a Provider that calls Pace before each request it
// sends, so that WithBudget charges its requests, not its calls.
type RequestPacer interface {
	Provider
	// PacesRequests reports whether every request waits in Pace.
	PacesRequests() bool
}

type chargeKey struct{}

// charge is the budget a context carries, and the user its requests are
// charged to (for round-robin between users).
type charge struct {
	b    *Budget
	user string
}

// Charge returns ctx with every request made with it charged to b as a
// request of user, at the priority ctx carries: whoever sends it waits in
// Pace first. A nil or unlimited b returns ctx itself. Charging a context
// again replaces the earlier budget and user; nothing is charged twice.
func Charge(ctx context.Context, b *Budget, user string) context.Context {
	if b == nil || b.Rate() == 0 {
		return ctx
	}
	return context.WithValue(ctx, chargeKey{}, charge{b: b, user: strings.ToLower(user)})
}

// Pace waits for one token of the budget ctx carries (Charge), for one
// request about to be sent, or takes one the context has prepaid
// (Budget.Prepay). A sender calls it before every request, retries and
// further batches included. Without a budget in ctx it only reports
// whether ctx has ended. Its error is ctx's: no request was sent.
func Pace(ctx context.Context) error {
	c, ok := ctx.Value(chargeKey{}).(charge)
	if !ok || prepaid(ctx) {
		return ctx.Err()
	}
	return c.b.Wait(ctx, c.user)
}

type budgeted struct {
	p     Provider
	b     *Budget
	paced bool // p waits in Pace before each request
}

var _ Provider = budgeted{}

// wait charges one call of user: a paced provider through the context it
// is given, any other by waiting for a token here.
func (x budgeted) wait(ctx context.Context, op, user string) (context.Context, error) {
	if x.paced {
		return Charge(ctx, x.b, user), nil
	}
	if prepaid(ctx) {
		return ctx, ctx.Err()
	}
	if err := x.b.Wait(ctx, strings.ToLower(user)); err != nil {
		return ctx, Classify(op, ErrTemporary, err)
	}
	return ctx, nil
}

func (x budgeted) CheckCredentials(ctx context.Context, auth Auth) error {
	ctx, err := x.wait(ctx, "CheckCredentials", auth.Username)
	if err != nil {
		return err
	}
	return x.p.CheckCredentials(ctx, auth)
}

func (x budgeted) CheckTuser(ctx context.Context, auth directapi.AuthenticationWithTuser) error {
	ctx, err := x.wait(ctx, "CheckTuser", auth.Username)
	if err != nil {
		return err
	}
	return x.p.CheckTuser(ctx, auth)
}

func (x budgeted) Folders(ctx context.Context, auth Auth, root string, subscribedOnly bool) ([]string, error) {
	ctx, err := x.wait(ctx, "Folders", auth.Username)
	if err != nil {
		return nil, err
	}
	return x.p.Folders(ctx, auth, root, subscribedOnly)
}

func (x budgeted) SetSubscribed(ctx context.Context, auth Auth, folders []string, subscribed bool) error {
	ctx, err := x.wait(ctx, "SetSubscribed", auth.Username)
	if err != nil {
		return err
	}
	return x.p.SetSubscribed(ctx, auth, folders, subscribed)
}

func (x budgeted) CreateFolder(ctx context.Context, auth Auth, folder string) error {
	ctx, err := x.wait(ctx, "CreateFolder", auth.Username)
	if err != nil {
		return err
	}
	return x.p.CreateFolder(ctx, auth, folder)
}

func (x budgeted) RenameFolder(ctx context.Context, auth Auth, folder, newName string) error {
	ctx, err := x.wait(ctx, "RenameFolder", auth.Username)
	if err != nil {
		return err
	}
	return x.p.RenameFolder(ctx, auth, folder, newName)
}

func (x budgeted) DeleteFolder(ctx context.Context, auth Auth, folder string) error {
	ctx, err := x.wait(ctx, "DeleteFolder", auth.Username)
	if err != nil {
		return err
	}
	return x.p.DeleteFolder(ctx, auth, folder)
}

func (x budgeted) UIDs(ctx context.Context, auth Auth, folder string) ([]int64, error) {
	ctx, err := x.wait(ctx, "UIDs", auth.Username)
	if err != nil {
		return nil, err
	}
	return x.p.UIDs(ctx, auth, folder)
}

func (x budgeted) Count(ctx context.Context, auth Auth, folder string) (int, error) {
	ctx, err := x.wait(ctx, "Count", auth.Username)
	if err != nil {
		return 0, err
	}
	return x.p.Count(ctx, auth, folder)
}

func (x budgeted) UnreadCount(ctx context.Context, auth Auth, folder string) (int, error) {
	ctx, err := x.wait(ctx, "UnreadCount", auth.Username)
	if err != nil {
		return 0, err
	}
	return x.p.UnreadCount(ctx, auth, folder)
}

func (x budgeted) Unread(ctx context.Context, auth Auth, folder string) ([]directapi.MessageDetail, error) {
	ctx, err := x.wait(ctx, "Unread", auth.Username)
	if err != nil {
		return nil, err
	}
	return x.p.Unread(ctx, auth, folder)
}

func (x budgeted) Metadata(ctx context.Context, auth Auth, folder string) ([]directapi.MessageDetail, error) {
	ctx, err := x.wait(ctx, "Metadata", auth.Username)
	if err != nil {
		return nil, err
	}
	return x.p.Metadata(ctx, auth, folder)
}

func (x budgeted) MetadataReceived(ctx context.Context, auth Auth, folder string, begin, end time.Time) ([]directapi.MessageDetail, error) {
	ctx, err := x.wait(ctx, "MetadataReceived", auth.Username)
	if err != nil {
		return nil, err
	}
	return x.p.MetadataReceived(ctx, auth, folder, begin, end)
}

func (x budgeted) Messages(ctx context.Context, auth Auth, folder string, uids []int64) ([]directapi.MessageDetail, error) {
	ctx, err := x.wait(ctx, "Messages", auth.Username)
	if err != nil {
		return nil, err
	}
	return x.p.Messages(ctx, auth, folder, uids)
}

func (x budgeted) Raw(ctx context.Context, auth Auth, folder string, uids []int64) (map[int64][]byte, error) {
	ctx, err := x.wait(ctx, "Raw", auth.Username)
	if err != nil {
		return nil, err
	}
	return x.p.Raw(ctx, auth, folder, uids)
}

func (x budgeted) SetRead(ctx context.Context, auth Auth, folder string, uids []int64, read bool) error {
	ctx, err := x.wait(ctx, "SetRead", auth.Username)
	if err != nil {
		return err
	}
	return x.p.SetRead(ctx, auth, folder, uids, read)
}

func (x budgeted) Copy(ctx context.Context, auth Auth, folder, dest string, uids []int64) error {
	ctx, err := x.wait(ctx, "Copy", auth.Username)
	if err != nil {
		return err
	}
	return x.p.Copy(ctx, auth, folder, dest, uids)
}

func (x budgeted) Move(ctx context.Context, auth Auth, folder, dest string, uids []int64) error {
	ctx, err := x.wait(ctx, "Move", auth.Username)
	if err != nil {
		return err
	}
	return x.p.Move(ctx, auth, folder, dest, uids)
}

func (x budgeted) Delete(ctx context.Context, auth Auth, folder string, uids []int64, forever bool) error {
	ctx, err := x.wait(ctx, "Delete", auth.Username)
	if err != nil {
		return err
	}
	return x.p.Delete(ctx, auth, folder, uids, forever)
}

func (x budgeted) Save(ctx context.Context, auth Auth, folder string, raws [][]byte) error {
	ctx, err := x.wait(ctx, "Save", auth.Username)
	if err != nil {
		return err
	}
	return x.p.Save(ctx, auth, folder, raws)
}

func (x budgeted) Send(ctx context.Context, auth Auth, tuser string, msg directapi.MessageWithHeader, withHeaders bool) (string, error) {
	ctx, err := x.wait(ctx, "Send", auth.Username)
	if err != nil {
		return "", err
	}
	return x.p.Send(ctx, auth, tuser, msg, withHeaders)
}

func (x budgeted) Forward(ctx context.Context, auth Auth, folder string, uids []int64, recipients []directapi.Recipient) (string, error) {
	ctx, err := x.wait(ctx, "Forward", auth.Username)
	if err != nil {
		return "", err
	}
	return x.p.Forward(ctx, auth, folder, uids, recipients)
}

func (x budgeted) Status(ctx context.Context, auth Auth, smtpIDs []string) ([]directapi.DirectMessageLog, error) {
	ctx, err := x.wait(ctx, "Status", auth.Username)
	if err != nil {
		return nil, err
	}
	return x.p.Status(ctx, auth, smtpIDs)
}

func (x budgeted) TuserStatus(ctx context.Context, auth directapi.AuthenticationWithTuser, smtpID string) ([]directapi.DirectMessageLog, error) {
	ctx, err := x.wait(ctx, "TuserStatus", auth.Username)
	if err != nil {
		return nil, err
	}
	return x.p.TuserStatus(ctx, auth, smtpID)
}
