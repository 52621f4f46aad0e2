// Package jsonobject decodes request bodies that are one JSON object into a flat
// struct, matching keys to fields exactly.
//
// encoding/json matches keys to fields case-insensitively and keeps the last of
// duplicate keys, so {"deviceId":"a","DEVICEID":"b"} decodes as deviceId "b",
// while a case-sensitive reader in front of palmgate (a gateway, a WAF, the
// agent's own log) sees "a". Decode reads such a body as every case-sensitive
// JSON reader does, and refuses the ambiguous ones: it is the matching of
// encoding/json/v2, which is still behind GOEXPERIMENT.
package jsonobject

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
)

// DuplicateError is the error of an object that holds a key more than once.
type DuplicateError struct {
	Name string // the key
}

func (e *DuplicateError) Error() string { return fmt.Sprintf("key %q appears more than once", e.Name) }

// ErrTrailingData is the error of a body with more than one JSON value.
var ErrTrailingData = errors.New("data after the JSON object")

// ErrNotObject is the error of a body that is not a JSON object.
var ErrNotObject = errors.New("not a JSON object")

// Decode decodes data, which must be exactly one JSON object, into the struct v
// points to. A key sets the field whose JSON name (its `json` tag, or its Go name
// without one) it equals exactly; any other key, a case variant of a field name
// included, is ignored, as encoding/json ignores unknown keys. A key present twice
// is refused with a *DuplicateError, whatever its values. A value of the wrong type
// is a *json.UnmarshalTypeError whose Field is the key; malformed JSON is a
// *json.SyntaxError or ErrNotObject; a second value is ErrTrailingData. Only the
// top-level keys are checked: values are decoded by encoding/json. Invalid UTF-8
// is the caller's to refuse (encoding/json replaces it).
func Decode(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("jsonobject: Decode needs a pointer to a struct, not %T", v)
	}
	rv = rv.Elem()
	fields := fieldsOf(rv.Type())

	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return ErrNotObject
	}
	type value struct {
		field int
		raw   json.RawMessage
	}
	var values []value
	seen := make(map[string]struct{}, len(fields))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		name := tok.(string) // the decoder allows only strings as keys
		if _, dup := seen[name]; dup {
			return &DuplicateError{Name: name}
		}
		seen[name] = struct{}{}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		if i, ok := fields[name]; ok {
			values = append(values, value{i, raw})
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return ErrTrailingData
	}
	for _, val := range values {
		if err := json.Unmarshal(val.raw, rv.Field(val.field).Addr().Interface()); err != nil {
			var typeErr *json.UnmarshalTypeError
			if errors.As(err, &typeErr) {
				typeErr.Field = jsonName(rv.Type().Field(val.field))
			}
			return err
		}
	}
	return nil
}

// fieldCache maps a struct type to its fields by exact JSON name.
var fieldCache sync.Map // reflect.Type -> map[string]int

func fieldsOf(t reflect.Type) map[string]int {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]int)
	}
	m := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if name := jsonName(f); name != "" {
			m[name] = i
		}
	}
	fieldCache.Store(t, m)
	return m
}

// jsonName is the name encoding/json gives f, or "" for a field it skips.
func jsonName(f reflect.StructField) string {
	tag := f.Tag.Get("json")
	if tag == "-" {
		return ""
	}
	if name, _, _ := strings.Cut(tag, ","); name != "" {
		return name
	}
	return f.Name
}
