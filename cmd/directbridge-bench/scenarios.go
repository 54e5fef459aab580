package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// scenarios lists the rows of issue 8's "Targets" table, in its order,
// then issue 21's (replicas), then those of issue 22 built so far.
func scenarios() []scenario {
	return []scenario{
		{name: "imaptest", title: "1. imaptest stress A and B against tuned Dovecot", fn: runImaptest, rows: []row{
			{scenario: "imaptest stress A, 10 clients: FETCH/s vs tuned Dovecot, same run, embedded sandbox, default settings", target: ">= 1.0x"},
			{scenario: "imaptest `Error:` lines, stress A and B", target: "0"},
			{scenario: "REST calls per IMAP command in that mix with the budget at 100/s", target: "<= 0.35"},
			{scenario: "issue 22: the same stress A, distinct messages, no budget: FETCH/s vs tuned Dovecot", target: ">= 1.5x, 0 `Error:` lines"},
			{scenario: "issue 22: the same at 100 requests/s: REST calls per IMAP command", target: "<= 0.15"},
		}},
		{name: "onebyone", title: "2. One message per command (JavaMail/mbsync style)", fn: runOneByOne, rows: []row{
			{scenario: "one-message-per-command fetch of 2,000 messages (JavaMail/mbsync style): time vs Dovecot, REST calls", target: "<= 1.5x, <= 42 calls"},
		}},
		{name: "sync10k", title: "3. First sync of 10,000 messages at 20 ms added provider latency", fn: runSync10k, rows: []row{
			{scenario: "first sync of 10,000 messages (SELECT, `UID FETCH 1:* (FLAGS INTERNALDATE RFC822.SIZE ENVELOPE BODYSTRUCTURE)`, 200 bodies) at 20 ms added provider latency", target: "<= 3 s"},
		}},
		{name: "sync50k", title: "4. 50,000-message folder", fn: runSync50k, rows: []row{
			{scenario: "50,000-message folder: first sync; bridge RSS after (sandbox separate)", target: "<= 20 s; <= 300 MB"},
			{scenario: "issue 22: 50,000-message folder, Thunderbird-style first sync (`UID FETCH 1:* (FLAGS)`, then `UID FETCH a:b (UID RFC822.SIZE FLAGS BODY.PEEK[HEADER.FIELDS (...)])` per 1,000 UIDs) on a fresh bridge vs cold Dovecot; bridge RSS after", target: "<= 1.5x, <= 300 MB"},
		}},
		{name: "idle", title: "5. New mail to an IDLE client", fn: runIdle, rows: []row{
			{scenario: "new mail to an IDLE client, p95, default settings", target: "<= 10 s"},
		}},
		{name: "manyidle", title: "6. 1,000 idle users plus one active user at 100 requests/s", fn: runManyIdle, rows: []row{
			{scenario: "1,000 idle users each IDLE on INBOX plus one active user at 100 requests/s: the active user's uncached FETCH BODY[] latency p99", target: "<= 3 provider round trips"},
		}},
		{name: "connmem", title: "7. Memory per idle connection", fn: runConnMem, rows: []row{
			{scenario: "memory per idle connection on a 10,000-message folder", target: "<= 50 KiB"},
		}},
		{name: "smtp", title: "8. SMTP through the bridge vs direct Send", fn: runSMTP, rows: []row{
			{scenario: "SMTP: 4 clients, 10 KB messages, vs direct Send calls at the same parallelism", target: ">= 0.8x"},
		}},
		{name: "replicas", title: "9. Two replicas on PostgreSQL behind HAProxy (issue 21)", fn: runReplicas, rows: []row{
			{scenario: "a change through replica A seen by an IDLE client on replica B, p95, with no extra provider call", target: "<= 1 s, 0 calls"},
			{scenario: "provider calls for the same client load, two replicas vs one", target: "<= 1.1x"},
			{scenario: "imaptest stress across two replicas (clients split by the balancer), FETCH/s vs one replica", target: ">= 0.9x, 0 `Error:` lines"},
			{scenario: "SIGKILL of one replica under IMAP and SMTP load: messages lost, sent twice, copied twice", target: "0, 0, 0"},
			{scenario: "the same: time until the killed replica's clients work again through the balancer", target: "<= 5 s after their reconnect"},
			{scenario: "UIDVALIDITY and UIDs of every folder seen through A and through B", target: "identical"},
			{scenario: "state copied from SQLite to PostgreSQL: clients that resync", target: "none (UIDVALIDITY unchanged)"},
			{scenario: "one replica on PostgreSQL vs one on SQLite, imaptest stress FETCH/s", target: ">= 0.8x"},
		}},
		{name: "smtpsizes", title: "10. SMTP at several sizes and parallelisms vs direct Send (issue 22)", fn: runSMTPSizes, rows: []row{
			{scenario: "SMTP vs raw Send, 1 client, 10 KB", target: ">= 0.85x"},
			{scenario: "SMTP vs raw Send, 4 clients, 10 KB", target: ">= 0.85x"},
			{scenario: "SMTP vs raw Send, 16 clients, 10 KB", target: ">= 0.85x"},
			{scenario: "SMTP vs raw Send, 1 client, 1 MB", target: ">= 0.85x"},
			{scenario: "SMTP vs raw Send, 4 clients, 1 MB", target: ">= 0.85x"},
			{scenario: "SMTP vs raw Send, 16 clients, 1 MB", target: ">= 0.85x"},
		}},
		{name: "polling", title: "11. Polling for thousands of users, and changes that change nothing (issue 22)", fn: runPolling, rows: []row{
			{scenario: "8 users, default settings, embedded sandbox: new mail to IDLE, p95", target: "<= 1.5 s"},
			{scenario: "1,000 users idle on INBOX at 100 requests/s: new mail to IDLE, p95", target: "<= 10 s"},
			{scenario: "5,000 users idle on INBOX at 100 requests/s (4,800 where the file limit is 20,000): new mail to IDLE, p95", target: "<= 45 s"},
			{scenario: "fetchmail-style session over 2,300 read messages (`UID STORE n +FLAGS (\\Seen)` each) at 20 ms provider latency, vs Dovecot", target: "<= 1.2x, <= 10 calls"},
		}},
	}
}

// restDelta is the number of REST requests between two scrapes.
func restDelta(m0, m1 metricsSnapshot) int {
	return int(m1.sums[metricREST] - m0.sums[metricREST] + 0.5)
}

// opsText lists the REST requests between two scrapes per operation.
func opsText(m0, m1 metricsSnapshot) string {
	ops := byLabel(m0, m1, metricREST, "op")
	if len(ops) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(ops))
	for k := range ops {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if ops[keys[i]] != ops[keys[j]] {
			return ops[keys[i]] > ops[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.0f", k, ops[k])
	}
	return strings.Join(parts, ", ")
}

// scrapePair scrapes the bridge's metrics; the error of a failed scrape is
// kept so that a figure that depends on it is reported as missing.
func (br *bridgeProc) scrape(ctx context.Context) (metricsSnapshot, error) {
	m, err := scrape(ctx, br.metricsURL)
	if err != nil {
		return m, fmt.Errorf("metrics: %w", err)
	}
	return m, nil
}
