package oidc

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// A dynamic client's name is shown on the login page and on the phone's consent
// screen, where the person checks which application asks them to sign in. A
// developer must not be able to make it read as the operator's own service or as
// another application, so checkName refuses:
//
//   - characters that do not show as themselves: control (Cc), format (Cf: the
//     bidi controls U+202A-U+202E and U+2066-U+2069, the marks U+200E/U+200F, zero
//     width spaces and joiners, U+FEFF, tags), private use (Co), unassigned (Cn),
//     line and paragraph separators, spaces other than U+0020, the Hangul fillers
//     and the blank Braille pattern (which render as nothing), and a run of more
//     than maxCombiningRun combining marks (stacked marks draw over other text);
//   - reserved names, matched on the name's key (NFKC, lower case, every run of
//     characters that is not a letter or digit a word break): a name with the
//     word "portal" or "admin" (or "administrator", "operator"); a name whose
//     letters and digits, run together, contain "palmgate" (so "Palm-Gate" and
//     "ｐａｌｍｇａｔｅ" are refused too); a name whose letters and digits equal
//     those of a static (Caddyfile) client's name, or of its id.
//
// Look-alikes from other scripts ("раlmgate" with Cyrillic letters) are not
// caught: that residual is in docs/SECURITY.md, and the consent screen marks every
// self-registered application as such.

// reservedWords are refused as whole words of a dynamic client's name.
var reservedWords = []string{"portal", "admin", "administrator", "operator"}

// reservedBrand is refused anywhere in a dynamic client's name's letters and digits.
const reservedBrand = "palmgate"

// maxCombiningRun bounds consecutive combining marks (enough for any script's
// letters with their diacritics).
const maxCombiningRun = 3

// invisibleRunes render as blank although their category is a letter or symbol.
var invisibleRunes = map[rune]bool{
	0x115F: true, 0x1160: true, 0x3164: true, 0xFFA0: true, // Hangul fillers
	0x2800: true, // Braille pattern blank
}

// nameKey is name in the form reserved names are compared in: its words, NFKC
// normalised and lower case, and the same letters and digits run together.
func nameKey(name string) (words []string, squashed string) {
	folded := strings.ToLower(norm.NFKC.String(name))
	words = strings.FieldsFunc(folded, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	return words, strings.Join(words, "")
}

// checkNameRunes refuses a character that does not show as itself.
func checkNameRunes(name string) error {
	run := 0
	for _, r := range name {
		if unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Me, r) {
			if run++; run > maxCombiningRun {
				return clientErr(ErrClientInvalid, "name: at most %d combining marks in a row", maxCombiningRun)
			}
			continue
		}
		run = 0
		switch {
		case r == utf8.RuneError:
			return clientErr(ErrClientInvalid, "name: not valid UTF-8")
		case unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs, unicode.Zl, unicode.Zp):
			return clientErr(ErrClientInvalid, "name: control, format (bidi or zero-width) and private-use characters are not allowed (U+%04X)", r)
		case unicode.Is(unicode.Zs, r) && r != ' ':
			return clientErr(ErrClientInvalid, "name: the only space allowed is U+0020 (found U+%04X)", r)
		case invisibleRunes[r]:
			return clientErr(ErrClientInvalid, "name: invisible characters are not allowed (U+%04X)", r)
		case !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Zs):
			return clientErr(ErrClientInvalid, "name: unassigned characters are not allowed (U+%04X)", r)
		}
	}
	return nil
}

// checkName checks a dynamic client's (trimmed) name: characters that show
// as themselves, and no reserved name (see above).
func (r *Clients) checkName(name string) error {
	if err := checkNameRunes(name); err != nil {
		return err
	}
	words, squashed := nameKey(name)
	if squashed == "" {
		return clientErr(ErrClientInvalid, "name: needs at least one letter or digit")
	}
	for _, w := range words {
		for _, r := range reservedWords {
			if w == r {
				return clientErr(ErrClientInvalid, "name: %q is reserved to the operator; choose a name without it", r)
			}
		}
	}
	if strings.Contains(squashed, reservedBrand) {
		return clientErr(ErrClientInvalid, "name: %q is reserved to the operator; choose a name without it", reservedBrand)
	}
	for _, cl := range r.byID {
		for _, taken := range []string{cl.name, cl.id} {
			if _, k := nameKey(taken); k != "" && k == squashed {
				return clientErr(ErrClientInvalid, "name: an application of the operator is called that; choose another name")
			}
		}
	}
	return nil
}
