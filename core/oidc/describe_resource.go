package oidc

// DescribeRequest says in words what an authorization request gives the
// application: its scopes (DescribeScopes) and, for a request for a resource (RFC
// 8707; an MCP client asks for its server, often with no scope at all), that
// resource, so that the person sees what the palm scan opens (issue 23).
func DescribeRequest(scopes []string, resource string) []string {
	words := DescribeScopes(scopes)
	if resource != "" {
		words = append(words, DescribeResource(resource))
	}
	return words
}

// DescribeResource says in words what a request for resource opens: the pages
// list it beside the scopes (DescribeScopeList).
func DescribeResource(resource string) string {
	return "Access to " + resource + " as you."
}
