package edge

import (
	"html/template"
	"net/url"
	"time"

	"github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/core/jsontime"
)

// checkAgents applies /oauth2/check's ?agents= (params: checkParams; allow, deny or only; deny by
// default, as palmgate_bearer's `agents`, so that a gateway never starts
// admitting agents acting for people by surprise) to a verified token.
func checkAgents(params url.Values, claims *bearer.Claims) error {
	q := params["agents"]
	if len(q) > 1 {
		return &fault.Error{Class: fault.Invalid, Code: bearer.CodeInvalidRequest, Message: "agents is given more than once"}
	}
	raw := ""
	if len(q) == 1 {
		raw = q[0]
	}
	mode, err := bearer.ParseAgentsMode(raw)
	if err != nil {
		return &fault.Error{Class: fault.Invalid, Code: bearer.CodeInvalidRequest, Message: "agents must be allow, deny or only"}
	}
	return mode.Admit(claims)
}

// actorLines tell the person, on the login page of a request with
// requested_actor, which of their agents would act for them towards the
// application, with the scopes above, and until when (end: the grant's end if
// they consented now, requested_actor_until or the longest a grant lives), in
// their own time zone as the page's other times.
func actorLines(deviceID string, end time.Time) []template.HTML {
	if deviceID == "" {
		return nil
	}
	t := dateTime(jsontime.Time(end))
	return []template.HTML{template.HTML(`<span id="requested-actor">Your agent <b>` + template.HTMLEscapeString(deviceID) +
		`</b> asks to act for you with these rights, without you, until <time class="local" id="requested-actor-until" datetime="` +
		template.HTMLEscapeString(t.ISO) + `" data-form="` + t.Form + `">` + template.HTMLEscapeString(t.UTC) +
		`</time>, unless you revoke it sooner on your agents page.</span>`)}
}
