package restclient_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/directbridge/directbridge/restclient"
	"github.com/directbridge/directbridge/sandbox"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// Example sends a message through the provider and reads it from the
// recipient's INBOX. The sandbox stands in for the provider here; against
// a real one, only BaseURL changes.
func Example() {
	srv, _ := sandbox.Open(sandbox.Options{Users: []sandbox.Account{
		{Name: "alice@direct.example", Password: "alice-pw"},
		{Name: "bob@direct.example", Password: "bob-pw"},
	}})
	defer srv.Close()
	hs := httptest.NewServer(srv)
	defer hs.Close()

	ctx := context.Background()
	c, _ := restclient.New(restclient.Options{BaseURL: hs.URL})
	alice := directapi.Authentication{Username: "alice@direct.example", Password: "alice-pw"}
	_, err := c.Send(ctx, alice, directapi.Message{
		Sender:     "alice@direct.example",
		Subject:    "Referral",
		Body:       "Please see the patient on Monday.",
		Recipients: []directapi.Recipient{{Email: "bob@direct.example", Type: directapi.TO}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	bob := directapi.Authentication{Username: "bob@direct.example", Password: "bob-pw"}
	uids, _ := c.GetUIDs(ctx, bob, "INBOX")
	msgs, _ := c.GetMessagesByUIDs(ctx, bob, "INBOX", uids)
	fmt.Println(len(msgs), msgs[0].Subject, msgs[0].Body)
	fmt.Println(bob) // credentials never print
	// Output:
	// 1 Referral Please see the patient on Monday.
	// {bob@direct.example [redacted]}
}
