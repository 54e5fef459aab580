package directapi

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
)

func TestRecipientCollectionUnmarshal(t *testing.T) {
	want := RecipientCollection{{Email: "a@x", Type: TO}, {Email: "b@x", Type: BCC}}
	for _, in := range []string{
		`[{"email":"a@x","type":"TO"},{"email":"b@x","type":"BCC"}]`,
		`{"recipients":[{"email":"a@x","type":"TO"},{"email":"b@x","type":"BCC"}]}`,
		`{"recipient":[{"email":"a@x","type":"TO"},{"email":"b@x","type":"BCC"}]}`,
		`{"items":[{"email":"a@x","type":"TO"},{"email":"b@x","type":"BCC"}]}`,
		`{"list":[{"email":"a@x","type":"TO"},{"email":"b@x","type":"BCC"}]}`,
	} {
		var rc RecipientCollection
		if err := json.Unmarshal([]byte(in), &rc); err != nil || !reflect.DeepEqual(rc, want) {
			t.Errorf("Unmarshal(%s) = %+v, %v", in, rc, err)
		}
	}
	var rc RecipientCollection
	if err := json.Unmarshal([]byte(`{"other":1}`), &rc); err != nil || rc != nil {
		t.Errorf("unknown wrapper = %+v, %v; want nil, nil", rc, err)
	}
	for _, in := range []string{`"a@x"`, `{"recipients":"a@x"}`, `5`} {
		if err := json.Unmarshal([]byte(in), &rc); err == nil {
			t.Errorf("Unmarshal(%s) succeeded", in)
		}
	}
	// A UidsRequestType with recipients decodes, e.g. on the sandbox side.
	var u UidsRequestType
	if err := json.Unmarshal([]byte(`{"auth":{"username":"alice@direct.example","password":"pw-alice"},"uids":[5000000000],"recipients":{"recipients":[{"email":"a@x","type":"TO"}]}}`), &u); err != nil {
		t.Fatal(err)
	}
	if u.Auth.Password.Reveal() != "pw-alice" || !slices.Equal(u.UIDs, []int64{5000000000}) || len(u.Recipients) != 1 {
		t.Errorf("UidsRequestType decoded as %+v", u)
	}
}
