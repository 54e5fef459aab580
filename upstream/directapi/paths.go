package directapi

// Paths of the two services below the provider's base URL
// (messaging-rest.md and registration-rest.md, "Base URL").
const (
	MessagingPath    = "/message-rest/api/message"
	RegistrationPath = "/DirectRegistrationRESTful/rest/Patient"
)
