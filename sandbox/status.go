package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/directbridge/directbridge/internal/sqlstmt"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// statusReport answers the status operations with the delivery logs of
// the given messages sent by u. An unknown smtpId contributes nothing: the
// document says the logs are "empty if ... nothing was found", so that is
// a success with no records, not an error.
func (s *Server) statusReport(tx *sqlstmt.Tx, u user, smtpIDs []string) (directapi.DirectMessageStatusReportResponseType, error) {
	ids := make([]string, 0, len(smtpIDs))
	for _, id := range smtpIDs {
		ids = append(ids, normSMTPID(id))
	}
	js, _ := json.Marshal(ids)
	rows, err := tx.Query(`SELECT smtp_id, sender, recipient, size, status, details, ts FROM delivery_logs
		WHERE sender = ? AND smtp_id IN (SELECT value FROM json_each(?)) ORDER BY id`, u.address, string(js))
	if err != nil {
		return directapi.DirectMessageStatusReportResponseType{}, err
	}
	defer rows.Close()
	now := s.now()
	logs := []directapi.DirectMessageLog{}
	for rows.Next() {
		var l directapi.DirectMessageLog
		var ts int64
		if err := rows.Scan(&l.MessageID, &l.From, &l.To, &l.MessageSize, &l.Status, &l.StatusDetails, &ts); err != nil {
			return directapi.DirectMessageStatusReportResponseType{}, err
		}
		l.TS = directapi.NewDate(time.UnixMilli(ts).UTC())
		l.Status, l.StatusDetails = currentStatus(l.Status, l.StatusDetails, l.TS.Time, now)
		logs = append(logs, l)
	}
	if err := rows.Err(); err != nil {
		return directapi.DirectMessageStatusReportResponseType{}, err
	}
	resp := directapi.DirectMessageStatusReportResponseType{APIResponse: ok()}
	if s.statusCSV {
		resp.HasCvData = true
		resp.MessageLogs = []directapi.DirectMessageLog{}
		if len(logs) > 0 {
			resp.CsvData = directapi.FormatStatusCSV(logs)
		}
		return resp, nil
	}
	resp.MessageLogs = logs
	return resp, nil
}

// currentStatus applies the one transition the document states: Waiting
// becomes NO MDN Received when no confirmation came within an hour. It is
// computed when read, so the sandbox's clock alone decides it.
func currentStatus(status, details string, sent, now time.Time) (string, string) {
	if status == directapi.StatusWaiting && now.Sub(sent) >= MDNTimeout {
		return directapi.StatusNoMDNReceived, "no MDN received from the receiving provider within one hour"
	}
	return status, details
}

// SetDeliveryStatus changes the recorded status of the message smtpID to
// recipient, as a receiving provider's MDN or DSN would. Tests use it to
// produce Delivered or Remotely Failed for addresses outside the sandbox.
func (s *Server) SetDeliveryStatus(ctx context.Context, smtpID, recipient, status, details string) error {
	res, err := s.stmts.Exec(ctx, `UPDATE delivery_logs SET status = ?, details = ? WHERE smtp_id = ? AND recipient = ? COLLATE NOCASE`,
		status, details, normSMTPID(smtpID), recipient)
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("sandbox: no delivery of %s to %s", smtpID, recipient)
	}
	return nil
}
