package mimeconv

import "time"

// Envelope is what IMAP's ENVELOPE (RFC 3501 §7.4.2, RFC 9051 §7.5.2)
// reports of a message, read from its header: the strings as written
// (unfolded; RFC 2047 encoded-words are not decoded, as the RFC has it),
// the addresses parsed by ParseAddressList.
type Envelope struct {
	// Date is the Date field (RFC 5322 §3.3, with the obsolete forms);
	// zero when absent or unreadable.
	Date time.Time
	// Subject is the Subject field as written.
	Subject string
	// The address fields, nil when absent or empty.
	From, Sender, ReplyTo, To, Cc, Bcc []Address
	// InReplyTo and MessageID are those fields as written.
	InReplyTo, MessageID string
}

// Envelope reads the envelope of a message from its header. The first
// field of each name counts.
func (h Header) Envelope() Envelope {
	return Envelope{
		Date:      parseDate(h.Get("Date")),
		Subject:   h.Get("Subject"),
		From:      ParseAddressList(h.Get("From")),
		Sender:    ParseAddressList(h.Get("Sender")),
		ReplyTo:   ParseAddressList(h.Get("Reply-To")),
		To:        ParseAddressList(h.Get("To")),
		Cc:        ParseAddressList(h.Get("Cc")),
		Bcc:       ParseAddressList(h.Get("Bcc")),
		InReplyTo: h.Get("In-Reply-To"),
		MessageID: h.Get("Message-ID"),
	}
}
