package bearer

import (
	"fmt"

	"github.com/palmgate/palmgate/core/fault"
)

// AgentsMode says whether a resource admits the tokens of agents acting for their
// humans (tokens with an `act` claim, issued by the jwt-bearer grant).
type AgentsMode string

// The agents modes.
const (
	// AgentsDeny refuses agents' tokens: the default, so that a resource never
	// starts admitting agents by surprise.
	AgentsDeny AgentsMode = "deny"
	// AgentsAllow admits people's and agents' tokens alike.
	AgentsAllow AgentsMode = "allow"
	// AgentsOnly admits agents' tokens only.
	AgentsOnly AgentsMode = "only"
)

// ParseAgentsMode reads a mode: deny, allow or only ("" is deny).
func ParseAgentsMode(s string) (AgentsMode, error) {
	switch m := AgentsMode(s); m {
	case "":
		return AgentsDeny, nil
	case AgentsDeny, AgentsAllow, AgentsOnly:
		return m, nil
	}
	return "", fmt.Errorf("%q must be allow, deny or only", s)
}

// Admit decides a verified token under the mode. The refusal is 403
// insufficient_scope (RFC 6750 3.1): the token is valid, and asking for another
// one of the same kind would not help; what it lacks is the right kind of holder.
func (m AgentsMode) Admit(c *Claims) error {
	switch {
	case c.Act != nil && m != AgentsAllow && m != AgentsOnly:
		return &fault.Error{Class: fault.Forbidden, Code: CodeInsufficientScope,
			Message: "this resource does not admit agents acting for a person"}
	case c.Act == nil && m == AgentsOnly:
		return &fault.Error{Class: fault.Forbidden, Code: CodeInsufficientScope,
			Message: "this resource admits only agents acting for a person"}
	}
	return nil
}
