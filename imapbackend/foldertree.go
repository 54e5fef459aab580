package imapbackend

import (
	"context"
	"strings"
	"sync"

	"github.com/directbridge/directbridge/upstream"
)

// GetFolders returns "sub-folders of a folder" (messaging-rest.md,
// operation 20): whether that is the whole tree below it or its direct
// children only is not shown, and providers differ (JavaMail's
// Folder.list() is one level). A bridge that took a children-only answer
// for the whole tree would lose every nested folder from LIST.
//
// So the tree is read as follows. When the root's answer holds a folder
// two levels down (INBOX.a.b), the provider lists whole trees, and the
// bridge remembers that for the process's lifetime: one call per listing.
// Otherwise each listed folder is asked for its own sub-folders, level by
// level, and what comes back beyond the root's answer proves the provider
// lists children only (remembered too). A tree that is flat in fact
// (INBOX.Sent, INBOX.Trash, ...) cannot tell the two apart, and costs one
// call per folder per listing (listings are cached for folderListTTL).
// The walk is on only with Config.FolderWalk (the bridge sets it for a
// real provider, and for a sandbox set to list children only).

// treeShape is what the bridge learned of the provider's GetFolders.
type treeShape int

const (
	shapeUnknown treeShape = iota
	shapeWholeTree
	shapeChildrenOnly
)

// maxTreeFolders bounds a walk of a children-only provider's tree.
const maxTreeFolders = 2000

// folderShape is the provider's GetFolders behaviour, as learned; a nil
// *folderShape means the provider is known to list whole trees.
type folderShape struct {
	mu    sync.Mutex
	shape treeShape
}

func (f *folderShape) get() treeShape {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.shape
}

func (f *folderShape) learn(s treeShape) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.shape == shapeUnknown {
		f.shape = s
	}
}

// folderTree returns every folder below INBOX (subscribed ones only when
// subscribed), whichever way the provider lists them. parents, when not
// nil, are the folders to ask for their subscribed children (the whole
// tree: a subscribed folder may sit below an unsubscribed one).
func folderTree(ctx context.Context, p upstream.Provider, auth upstream.Auth, shape *folderShape, subscribed bool, parents func(context.Context) ([]string, error)) ([]string, error) {
	names, err := p.Folders(ctx, auth, "INBOX", subscribed)
	if err != nil || shape == nil {
		return names, err
	}
	for _, n := range names {
		if strings.Count(n, string(delim)) >= 2 {
			shape.learn(shapeWholeTree)
		}
	}
	if shape.get() == shapeWholeTree {
		return names, nil
	}
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		seen[n] = true
	}
	out := append([]string(nil), names...)
	var queue []string
	if subscribed && parents != nil {
		all, err := parents(ctx)
		if err != nil {
			return nil, err
		}
		queue = all
	} else {
		queue = append(queue, names...)
	}
	asked := map[string]bool{}
	for len(queue) > 0 && len(asked) < maxTreeFolders {
		parent := queue[0]
		queue = queue[1:]
		if asked[parent] {
			continue
		}
		asked[parent] = true
		kids, err := p.Folders(ctx, auth, parent, subscribed)
		if err != nil {
			if upstream.IsRefusal(err) {
				continue // deleted meanwhile
			}
			return nil, err
		}
		for _, k := range kids {
			if !strings.HasPrefix(k, parent+string(delim)) || seen[k] {
				continue
			}
			seen[k] = true
			out = append(out, k)
			shape.learn(shapeChildrenOnly)
			if !subscribed || parents == nil {
				queue = append(queue, k)
			}
		}
	}
	return out, nil
}
