package upstream

import (
	"context"
	"strings"
	"time"

	"github.com/directbridge/directbridge/directapi"
)

// WithBudget returns p with every request first waiting for b (see
// Budget): one token per call. The callers mark background work with
// WithPriority. A nil or unlimited b returns p itself.
func WithBudget(p Provider, b *Budget) Provider {
	if b == nil || b.Rate() == 0 {
		return p
	}
	return budgeted{p: p, b: b}
}

type budgeted struct {
	p Provider
	b *Budget
}

var _ Provider = budgeted{}

func (x budgeted) wait(ctx context.Context, op, user string) error {
	if prepaid(ctx) {
		return ctx.Err()
	}
	if err := x.b.Wait(ctx, strings.ToLower(user)); err != nil {
		return Classify(op, ErrTemporary, err)
	}
	return nil
}

func (x budgeted) CheckCredentials(ctx context.Context, auth Auth) error {
	if err := x.wait(ctx, "CheckCredentials", auth.Username); err != nil {
		return err
	}
	return x.p.CheckCredentials(ctx, auth)
}

func (x budgeted) CheckTuser(ctx context.Context, auth directapi.AuthenticationWithTuser) error {
	if err := x.wait(ctx, "CheckTuser", auth.Username); err != nil {
		return err
	}
	return x.p.CheckTuser(ctx, auth)
}

func (x budgeted) Folders(ctx context.Context, auth Auth, root string, subscribedOnly bool) ([]string, error) {
	if err := x.wait(ctx, "Folders", auth.Username); err != nil {
		return nil, err
	}
	return x.p.Folders(ctx, auth, root, subscribedOnly)
}

func (x budgeted) SetSubscribed(ctx context.Context, auth Auth, folders []string, subscribed bool) error {
	if err := x.wait(ctx, "SetSubscribed", auth.Username); err != nil {
		return err
	}
	return x.p.SetSubscribed(ctx, auth, folders, subscribed)
}

func (x budgeted) CreateFolder(ctx context.Context, auth Auth, folder string) error {
	if err := x.wait(ctx, "CreateFolder", auth.Username); err != nil {
		return err
	}
	return x.p.CreateFolder(ctx, auth, folder)
}

func (x budgeted) RenameFolder(ctx context.Context, auth Auth, folder, newName string) error {
	if err := x.wait(ctx, "RenameFolder", auth.Username); err != nil {
		return err
	}
	return x.p.RenameFolder(ctx, auth, folder, newName)
}

func (x budgeted) DeleteFolder(ctx context.Context, auth Auth, folder string) error {
	if err := x.wait(ctx, "DeleteFolder", auth.Username); err != nil {
		return err
	}
	return x.p.DeleteFolder(ctx, auth, folder)
}

func (x budgeted) UIDs(ctx context.Context, auth Auth, folder string) ([]int64, error) {
	if err := x.wait(ctx, "UIDs", auth.Username); err != nil {
		return nil, err
	}
	return x.p.UIDs(ctx, auth, folder)
}

func (x budgeted) Count(ctx context.Context, auth Auth, folder string) (int, error) {
	if err := x.wait(ctx, "Count", auth.Username); err != nil {
		return 0, err
	}
	return x.p.Count(ctx, auth, folder)
}

func (x budgeted) UnreadCount(ctx context.Context, auth Auth, folder string) (int, error) {
	if err := x.wait(ctx, "UnreadCount", auth.Username); err != nil {
		return 0, err
	}
	return x.p.UnreadCount(ctx, auth, folder)
}

func (x budgeted) Unread(ctx context.Context, auth Auth, folder string) ([]directapi.MessageDetail, error) {
	if err := x.wait(ctx, "Unread", auth.Username); err != nil {
		return nil, err
	}
	return x.p.Unread(ctx, auth, folder)
}

func (x budgeted) Metadata(ctx context.Context, auth Auth, folder string) ([]directapi.MessageDetail, error) {
	if err := x.wait(ctx, "Metadata", auth.Username); err != nil {
		return nil, err
	}
	return x.p.Metadata(ctx, auth, folder)
}

func (x budgeted) MetadataReceived(ctx context.Context, auth Auth, folder string, begin, end time.Time) ([]directapi.MessageDetail, error) {
	if err := x.wait(ctx, "MetadataReceived", auth.Username); err != nil {
		return nil, err
	}
	return x.p.MetadataReceived(ctx, auth, folder, begin, end)
}

func (x budgeted) Messages(ctx context.Context, auth Auth, folder string, uids []int64) ([]directapi.MessageDetail, error) {
	if err := x.wait(ctx, "Messages", auth.Username); err != nil {
		return nil, err
	}
	return x.p.Messages(ctx, auth, folder, uids)
}

func (x budgeted) Raw(ctx context.Context, auth Auth, folder string, uids []int64) (map[int64][]byte, error) {
	if err := x.wait(ctx, "Raw", auth.Username); err != nil {
		return nil, err
	}
	return x.p.Raw(ctx, auth, folder, uids)
}

func (x budgeted) SetRead(ctx context.Context, auth Auth, folder string, uids []int64, read bool) error {
	if err := x.wait(ctx, "SetRead", auth.Username); err != nil {
		return err
	}
	return x.p.SetRead(ctx, auth, folder, uids, read)
}

func (x budgeted) Copy(ctx context.Context, auth Auth, folder, dest string, uids []int64) error {
	if err := x.wait(ctx, "Copy", auth.Username); err != nil {
		return err
	}
	return x.p.Copy(ctx, auth, folder, dest, uids)
}

func (x budgeted) Move(ctx context.Context, auth Auth, folder, dest string, uids []int64) error {
	if err := x.wait(ctx, "Move", auth.Username); err != nil {
		return err
	}
	return x.p.Move(ctx, auth, folder, dest, uids)
}

func (x budgeted) Delete(ctx context.Context, auth Auth, folder string, uids []int64, forever bool) error {
	if err := x.wait(ctx, "Delete", auth.Username); err != nil {
		return err
	}
	return x.p.Delete(ctx, auth, folder, uids, forever)
}

func (x budgeted) Save(ctx context.Context, auth Auth, folder string, raws [][]byte) error {
	if err := x.wait(ctx, "Save", auth.Username); err != nil {
		return err
	}
	return x.p.Save(ctx, auth, folder, raws)
}

func (x budgeted) Send(ctx context.Context, auth Auth, tuser string, msg directapi.MessageWithHeader, withHeaders bool) (string, error) {
	if err := x.wait(ctx, "Send", auth.Username); err != nil {
		return "", err
	}
	return x.p.Send(ctx, auth, tuser, msg, withHeaders)
}

func (x budgeted) Forward(ctx context.Context, auth Auth, folder string, uids []int64, recipients []directapi.Recipient) (string, error) {
	if err := x.wait(ctx, "Forward", auth.Username); err != nil {
		return "", err
	}
	return x.p.Forward(ctx, auth, folder, uids, recipients)
}

func (x budgeted) Status(ctx context.Context, auth Auth, smtpIDs []string) ([]directapi.DirectMessageLog, error) {
	if err := x.wait(ctx, "Status", auth.Username); err != nil {
		return nil, err
	}
	return x.p.Status(ctx, auth, smtpIDs)
}

func (x budgeted) TuserStatus(ctx context.Context, auth directapi.AuthenticationWithTuser, smtpID string) ([]directapi.DirectMessageLog, error) {
	if err := x.wait(ctx, "TuserStatus", auth.Username); err != nil {
		return nil, err
	}
	return x.p.TuserStatus(ctx, auth, smtpID)
}
