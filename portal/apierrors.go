package portal

import (
	"encoding/json"
	"net/http"

	"github.com/palmgate/palmgate/internal/negotiate"
)

// The portal is browsed, but programs reach it too (a mistyped API URL, a probe,
// a script following a link): an error answered to a request whose Accept does
// not name text/html (negotiate.AcceptsHTML, the rule of the edge's error pages)
// is JSON in the /v1 error shape, {"error","code"}, with the page's status.

// errorBody is the JSON of a portal error.
type errorBody struct {
	Message string `json:"error"`
	Code    string `json:"code"`
}

// statusCodes are the stable codes of the portal's error statuses.
var statusCodes = map[int]string{
	http.StatusBadRequest:            "bad_request",
	http.StatusUnauthorized:          "unauthorized",
	http.StatusForbidden:             "forbidden",
	http.StatusNotFound:              "not_found",
	http.StatusMethodNotAllowed:      "method_not_allowed",
	http.StatusRequestEntityTooLarge: "body_too_large", // the /v1 code of the same refusal
	http.StatusServiceUnavailable:    "unavailable",
	http.StatusInternalServerError:   "internal_error",
}

// failJSON answers status and msg as JSON.
func failJSON(w http.ResponseWriter, status int, msg string) {
	code, ok := statusCodes[status]
	if !ok {
		code = "error"
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(errorBody{Message: msg, Code: code})
}

// wantsPage reports whether r asks for a page rather than JSON.
func wantsPage(r *http.Request) bool { return negotiate.AcceptsHTML(r) }
