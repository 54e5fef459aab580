package bridge

import (
	"context"
	"fmt"

	"github.com/directbridge/directbridge/imapbackend"
)

// layoutSetting names the IMAP layout in the state store's settings.
const layoutSetting = "imap_layout"

// imapLayout decides the IMAP layout and records it in the data
// directory. A layout change gives every folder another name, and
// clients then download every folder again as if it were new, so an
// upgrade must not change it unasked:
//
//   - DIRECTBRIDGE_IMAP_LAYOUT set: that layout, with a warning when the
//     data directory was used with the other one;
//   - unset, the data directory has a recorded layout: that one;
//   - unset, none recorded but IMAP clients used the directory (folder
//     state from a version before the setting): inbox, the only layout
//     there was;
//   - unset, a new data directory: flat, which every client expects
//     without setup (see README, "Folder layout").
func (b *Bridge) imapLayout(ctx context.Context) (imapbackend.Layout, error) {
	recorded, err := b.store.Setting(ctx, layoutSetting)
	if err != nil {
		return "", err
	}
	var layout imapbackend.Layout
	why := "DIRECTBRIDGE_IMAP_LAYOUT"
	switch {
	case b.cfg.IMAPLayout != "":
		layout, _ = imapbackend.ParseLayout(b.cfg.IMAPLayout) // checked by Validate
		if recorded != "" && recorded != string(layout) {
			b.log.Warn("imap layout changed: clients will see every folder under a new name and download it again",
				"from", recorded, "to", string(layout))
		}
	case recorded != "":
		layout, why = imapbackend.Layout(recorded), "recorded in the data directory"
	default:
		used, err := b.store.UsedBefore(ctx)
		if err != nil {
			return "", err
		}
		layout, why = imapbackend.LayoutFlat, "new data directory"
		if used {
			layout, why = imapbackend.LayoutInbox, "data directory used before layouts existed"
		}
	}
	if _, ok := imapbackend.ParseLayout(string(layout)); !ok {
		return "", fmt.Errorf("imap layout %q recorded in the data directory is unknown", layout)
	}
	if err := b.store.SetSetting(ctx, layoutSetting, string(layout)); err != nil {
		return "", err
	}
	b.log.Info("imap folder layout", "layout", string(layout), "because", why)
	return layout, nil
}
