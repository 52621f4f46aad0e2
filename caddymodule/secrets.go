package caddymodule

import (
	"net/url"
	"regexp"
	"strings"

	"go.uber.org/zap"
)

// Caddy keeps the configuration as it was loaded: the admin API serves it
// (GET /config/apps/palmgate/) and Caddy writes it to autosave.json. A secret
// written there in clear is readable by whoever reaches either, so Provision
// warns about each one, naming the option and its safe form, and never the
// value itself. A placeholder ({env.*}, {file.*}) is kept as such in the config
// and replaced only in memory, so it is safe.

// placeholder matches one Caddy placeholder, such as {env.APP_SECRET}.
var placeholder = regexp.MustCompile(`\{[^{}\s]+\}`)

// marker stands in for a placeholder while a DSN is parsed: letters only, which
// every DSN syntax takes as a plain value.
const marker = "PALMGATEPLACEHOLDER"

// inClear reports whether v holds anything beyond placeholders.
func inClear(v string) bool {
	return strings.TrimSpace(placeholder.ReplaceAllString(v, "")) != ""
}

// warnSecretsInConfig logs one warning per secret the configuration holds in
// clear. It reads the configuration as loaded: call it before placeholders are
// replaced.
func (a *App) warnSecretsInConfig(log *zap.Logger) {
	const where = "it is shown by the admin API (GET /config/) and written to autosave.json"
	for _, c := range a.Clients {
		if inClear(c.Secret) {
			log.Warn("client secret in clear in Caddy's config: "+where+"; use secret_hash (see `caddy palmgate hash-secret`), or a placeholder such as {env.APP_SECRET} or {file./path/to/secret}",
				zap.String("option", "client.secret"), zap.String("client_id", c.ID))
		}
	}
	if inClear(a.PairwiseSecret) {
		log.Warn("pairwise_secret in clear in Caddy's config: "+where+"; use a placeholder such as {env.PALMGATE_PAIRWISE_SECRET} or {file./path/to/secret}, or leave it out (then it is generated once and kept in the store)",
			zap.String("option", "pairwise_secret"))
	}
	if a.Storage != nil && a.Storage.Backend == "postgres" && dsnHasPassword(a.Storage.DSN) {
		log.Warn("storage postgres: the DSN carries a password in clear in Caddy's config: "+where+"; use a placeholder for the DSN or its password, such as {env.PALMGATE_DSN} or {file./path/to/dsn}, or a .pgpass file",
			zap.String("option", "storage.dsn"))
	}
}

// dsnHasPassword reports whether a PostgreSQL connection string, as written in
// the config, carries a password outside placeholders: in a URL's userinfo or
// `password` query parameter, or in the `password` key of key=value pairs.
func dsnHasPassword(dsn string) bool {
	s := placeholder.ReplaceAllString(strings.TrimSpace(dsn), marker)
	var pw string
	if strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") {
		u, err := url.Parse(s)
		if err != nil {
			// Unparsable here: judge by the userinfo's text, erring towards a warning.
			rest := s[len("postgres://"):]
			if strings.HasPrefix(s, "postgresql://") {
				rest = s[len("postgresql://"):]
			}
			at := strings.LastIndex(rest, "@")
			if at < 0 {
				return false
			}
			_, pw, ok := strings.Cut(rest[:at], ":")
			return ok && strings.ReplaceAll(pw, marker, "") != ""
		}
		if p, ok := u.User.Password(); ok {
			pw = p
		}
		if p := u.Query().Get("password"); p != "" {
			pw += p
		}
	} else {
		pw = keyValue(s)["password"]
	}
	return strings.ReplaceAll(pw, marker, "") != ""
}

// keyValue parses libpq's key=value connection string form: values are bare
// words or single-quoted with backslash escapes, and spaces may surround '='.
func keyValue(s string) map[string]string {
	kv := map[string]string{}
	i := 0
	skip := func() {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
			i++
		}
	}
	for {
		skip()
		if i >= len(s) {
			return kv
		}
		start := i
		for i < len(s) && s[i] != '=' && s[i] != ' ' && s[i] != '\t' {
			i++
		}
		key := s[start:i]
		skip()
		if i >= len(s) || s[i] != '=' {
			return kv // malformed: pgx refuses it too
		}
		i++
		skip()
		var v strings.Builder
		if i < len(s) && s[i] == '\'' {
			for i++; i < len(s) && s[i] != '\''; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				v.WriteByte(s[i])
			}
			i++
		} else {
			for ; i < len(s) && s[i] != ' ' && s[i] != '\t' && s[i] != '\n'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				v.WriteByte(s[i])
			}
		}
		kv[key] = v.String()
	}
}
