package datadir

import (
	"encoding/base64"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/ctrlquorum/ctrlquorum/raftlog"
)

// Field is one field of a record as a dump shows it.
type Field struct {
	Name  string
	Value any // JSON-ready: ids as Kafka Uuid text, secrets as their length
}

// secretFields are the byte fields of SCRAM credentials: verifiers, not
// passwords, but still nothing a dump should print.
var secretFields = map[string]bool{"Salt": true, "StoredKey": true, "ServerKey": true}

// RecordFields lists a record's fields in their encoded order, with
// 16-byte ids in Kafka's Uuid text form and SCRAM salts and keys replaced
// by their length.
func RecordFields(r raftlog.Record) []Field {
	v := reflect.Indirect(reflect.ValueOf(r))
	var out []Field
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		if secretFields[f.Name] && f.Type.Kind() == reflect.Slice {
			out = append(out, Field{f.Name, fmt.Sprintf("redacted-%d-bytes", v.Field(i).Len())})
			continue
		}
		out = append(out, Field{f.Name, plain(v.Field(i))})
	}
	return out
}

// plain turns a field's value into what JSON and a table print well.
func plain(v reflect.Value) any {
	switch {
	case v.Kind() == reflect.Array && v.Len() == 16 && v.Type().Elem().Kind() == reflect.Uint8:
		b := make([]byte, 16)
		reflect.Copy(reflect.ValueOf(b), v)
		return base64.RawURLEncoding.EncodeToString(b)
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8:
		return base64.StdEncoding.EncodeToString(v.Bytes())
	case v.Kind() == reflect.Slice:
		if v.IsNil() {
			return []any{}
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = plain(v.Index(i))
		}
		return out
	case v.Kind() == reflect.Struct:
		m := map[string]any{}
		for i := 0; i < v.NumField(); i++ {
			if f := v.Type().Field(i); f.IsExported() {
				m[f.Name] = plain(v.Field(i))
			}
		}
		return m
	}
	return v.Interface()
}

// FormatFields prints fields as Name=value pairs on one line.
func FormatFields(fs []Field) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = f.Name + "=" + formatValue(f.Value)
	}
	return strings.Join(parts, " ")
}

func formatValue(v any) string {
	switch x := v.(type) {
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = formatValue(e)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sortStrings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + ":" + formatValue(x[k])
		}
		return "{" + strings.Join(parts, " ") + "}"
	case string:
		if x == "" || strings.ContainsAny(x, " =,[]{}") {
			return fmt.Sprintf("%q", x)
		}
		return x
	}
	return fmt.Sprint(v)
}
func sortStrings(s []string) { sort.Strings(s) }
