package oidc

// DescribeScopes says in words what a login with scopes gives the application, for
// the login page and the person's app.
func DescribeScopes(scopes []string) []string {
	var words []string
	for _, sc := range scopes {
		switch sc {
		case ScopeOpenID:
			words = append(words, "A private identifier for you, only for this app. Never your palm data.")
		case ScopeOfflineAccess:
			words = append(words, "It can keep you signed in.")
		case ScopeProfile:
			words = append(words, "A made-up user name, only for this app.")
		case ScopeEmail, ScopeAddress, ScopePhone:
			// Granted without claims: palmgate knows none of them; nothing to say.
		default:
			words = append(words, "Access to "+sc+".")
		}
	}
	return words
}
