package imapbackend

import "time"

func sinceSync(m *mirror) time.Duration { return time.Since(m.syncedAt) }
