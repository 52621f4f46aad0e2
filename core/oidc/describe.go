package oidc

// DescribeScopes says in words what a login with scopes gives the application, for
// the login page and the person's app.
func DescribeScopes(scopes []string) []string {
	var words []string
	for _, d := range DescribeScopeList(scopes) {
		words = append(words, d.Words)
	}
	return words
}

// ScopeWords is a scope and what it gives the application, in words.
type ScopeWords struct {
	Scope, Words string
}

// DescribeScopeList is DescribeScopes with each description's scope, for the
// pages' list of scopes. Scopes that give nothing (email, address, phone: palmgate
// knows none of them) are left out.
func DescribeScopeList(scopes []string) []ScopeWords {
	var list []ScopeWords
	for _, sc := range scopes {
		var words string
		switch sc {
		case ScopeOpenID:
			words = "A private identifier for you, only for this app. Never your palm data."
		case ScopeOfflineAccess:
			words = "It can keep you signed in."
		case ScopeProfile:
			words = "A made-up user name, only for this app."
		case ScopeEmail, ScopeAddress, ScopePhone:
			continue // granted without claims: nothing to say
		default:
			words = "Access to " + sc + "."
		}
		list = append(list, ScopeWords{Scope: sc, Words: words})
	}
	return list
}
