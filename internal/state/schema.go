package state

// migrations is the state store's schema history, oldest first. Version n
// is migrations[n-1]. Append only: a released migration is never edited,
// because databases out there already carry it; a change of schema is a
// new migration.
var migrations = []migration{
	{
		version: 1,
		name:    "sent journal and folder state",
		// The schema the store had before it was versioned, word for
		// word. Its IF NOT EXISTS clauses let a database made then
		// adopt version 1 without change.
		sql: `
CREATE TABLE IF NOT EXISTS sent (
	id          INTEGER PRIMARY KEY,
	username    TEXT NOT NULL COLLATE NOCASE,
	smtp_id     TEXT NOT NULL,
	message_id  TEXT NOT NULL,
	sent_at     INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS sent_by_message_id ON sent (username, message_id);
CREATE INDEX IF NOT EXISTS sent_by_smtp_id ON sent (smtp_id);

CREATE TABLE IF NOT EXISTS folder_state (
	username     TEXT NOT NULL COLLATE NOCASE,
	folder       TEXT NOT NULL,
	uid_validity INTEGER NOT NULL,
	uid_next     INTEGER NOT NULL,
	PRIMARY KEY (username, folder)
);
CREATE TABLE IF NOT EXISTS flags (
	username     TEXT NOT NULL COLLATE NOCASE,
	folder       TEXT NOT NULL,
	uid_validity INTEGER NOT NULL,
	uid          INTEGER NOT NULL,
	flags        TEXT NOT NULL,
	PRIMARY KEY (username, folder, uid_validity, uid)
);
CREATE TABLE IF NOT EXISTS validity_counter (
	id   INTEGER PRIMARY KEY CHECK (id = 1),
	last INTEGER NOT NULL
);
`,
	}, {
		version: 2,
		name:    "submission journal",
		sql: `
CREATE TABLE submissions (
	key        TEXT PRIMARY KEY,
	username   TEXT NOT NULL COLLATE NOCASE,
	state      TEXT NOT NULL,
	smtp_id    TEXT NOT NULL,
	match      TEXT NOT NULL,
	first_at   INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
);
CREATE INDEX submissions_by_age ON submissions (first_at);
`,
	}, {
		version: 3,
		name:    "delivery status notifications filed",
		sql: `
CREATE TABLE reported (
	smtp_id   TEXT NOT NULL,
	recipient TEXT NOT NULL,
	at        INTEGER NOT NULL,
	PRIMARY KEY (smtp_id, recipient)
);
`,
	}, {
		version: 4,
		name:    "flags of messages being copied or moved",
		sql: `
CREATE TABLE pending_flags (
	id         INTEGER PRIMARY KEY,
	username   TEXT NOT NULL COLLATE NOCASE,
	folder     TEXT NOT NULL,
	msg_id     TEXT NOT NULL,
	size       INTEGER NOT NULL,
	flags      TEXT NOT NULL,
	created_at INTEGER NOT NULL
);
CREATE INDEX pending_flags_by_folder ON pending_flags (username, folder);
`,
	}, {
		version: 5,
		name:    "subscribed names without a folder",
		sql: `
CREATE TABLE subscriptions (
	username TEXT NOT NULL COLLATE NOCASE,
	name     TEXT NOT NULL,
	PRIMARY KEY (username, name)
);
`,
	}, {
		version: 6,
		name:    "settings the data directory was used with",
		sql: `
CREATE TABLE settings (
	name  TEXT PRIMARY KEY,
	value TEXT NOT NULL
);
`,
	}, {
		version: 7,
		name:    "IMAP changes whose outcome may be unknown",
		sql: `
CREATE TABLE attempts (
	id         INTEGER PRIMARY KEY,
	username   TEXT NOT NULL COLLATE NOCASE,
	key        TEXT NOT NULL,
	owner      TEXT NOT NULL,
	state      TEXT NOT NULL,
	mark       INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
);
CREATE INDEX attempts_by_key ON attempts (username, key);
CREATE INDEX attempts_by_age ON attempts (created_at);
`,
	}, {
		version: 8,
		name:    "sent messages followed for bounces",
		// Envelope only: addresses, ids and DSN parameters, never the
		// subject or any other header (see tracked.go).
		sql: `
CREATE TABLE tracked (
	smtp_id    TEXT PRIMARY KEY,
	username   TEXT NOT NULL COLLATE NOCASE,
	sender     TEXT NOT NULL,
	message_id TEXT NOT NULL,
	env_id     TEXT NOT NULL,
	recipients TEXT NOT NULL,
	sent_at    INTEGER NOT NULL
);
CREATE INDEX tracked_by_age ON tracked (sent_at);
`,
	}, {
		version: 9,
		name:    "submissions answered, and retries owed",
		// Existing entries are taken as not answered: a retry of their
		// bytes is still recognised as one (smtpbackend/journal.go).
		sql: `
ALTER TABLE submissions ADD COLUMN answered INTEGER NOT NULL DEFAULT 0;
ALTER TABLE submissions ADD COLUMN deferred INTEGER NOT NULL DEFAULT 0;
`,
	}, {
		version: 10,
		name:    "delivery status notifications claimed before they are filed",
		// Records made before were written once the DSN was being filed
		// and are taken as filed, as they were then.
		sql: `
ALTER TABLE reported ADD COLUMN filed INTEGER NOT NULL DEFAULT 1;
ALTER TABLE reported ADD COLUMN dsn_id TEXT NOT NULL DEFAULT '';
`,
	}, {
		version: 11,
		name:    "replicas and their heartbeats",
		// Written by package cluster on PostgreSQL only (a bridge on
		// SQLite runs alone); here for one history on both.
		sql: `
CREATE TABLE replicas (
	id         TEXT PRIMARY KEY,
	started_at INTEGER NOT NULL,
	seen_at    INTEGER NOT NULL
);
`,
	}, {
		version: 12,
		name:    "where replicas reach each other",
		// The address a replica serves the messages it holds in memory
		// on (internal/peerfetch), '' when it serves none.
		sql: `
ALTER TABLE replicas ADD COLUMN addr TEXT NOT NULL DEFAULT '';
`,
	}, {
		version: 13,
		name:    "replicas' life locks, for the journal of attempts",
		// The key of a replica's life lock and the server process of
		// the connection holding it, which the journal of attempts looks
		// up in pg_locks (ownerLiveSQL).
		sql: `
ALTER TABLE replicas ADD COLUMN life_key INTEGER NOT NULL DEFAULT 0;
ALTER TABLE replicas ADD COLUMN life_pid INTEGER NOT NULL DEFAULT 0;
`,
	},
}
