package configmodel

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// checkType refuses a value that Kafka's ConfigDef would not parse as the
// type. Values are taken as given, without trimming; booleans in any case,
// as Kafka takes them.
func checkType(t kmsg.ConfigType, v string) error {
	switch t {
	case kmsg.ConfigTypeBoolean:
		if _, ok := ParseBool(v); !ok {
			return fmt.Errorf("value %q is not a boolean (true or false)", v)
		}
	case kmsg.ConfigTypeInt:
		if _, err := strconv.ParseInt(v, 10, 32); err != nil {
			return fmt.Errorf("value %q is not a 32-bit integer", v)
		}
	case kmsg.ConfigTypeShort:
		if _, err := strconv.ParseInt(v, 10, 16); err != nil {
			return fmt.Errorf("value %q is not a 16-bit integer", v)
		}
	case kmsg.ConfigTypeLong:
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			return fmt.Errorf("value %q is not a 64-bit integer", v)
		}
	case kmsg.ConfigTypeDouble:
		if f, err := strconv.ParseFloat(v, 64); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("value %q is not a number", v)
		}
	}
	return nil
}

// ParseBool reads a boolean config value as Kafka does: true or false in
// any case.
func ParseBool(v string) (value, ok bool) {
	switch {
	case strings.EqualFold(v, "true"):
		return true, true
	case strings.EqualFold(v, "false"):
		return false, true
	}
	return false, false
}

func atLeast(min int64) func(string) error {
	return func(v string) error {
		if n, _ := strconv.ParseInt(v, 10, 64); n < min {
			return fmt.Errorf("value %s must be at least %d", v, min)
		}
		return nil
	}
}

// intIn accepts values in any of the closed ranges given as pairs.
func intIn(bounds ...int64) func(string) error {
	return func(v string) error {
		n, _ := strconv.ParseInt(v, 10, 64)
		for i := 0; i+1 < len(bounds); i += 2 {
			if n >= bounds[i] && n <= bounds[i+1] {
				return nil
			}
		}
		var want []string
		for i := 0; i+1 < len(bounds); i += 2 {
			if bounds[i] == bounds[i+1] {
				want = append(want, strconv.FormatInt(bounds[i], 10))
			} else {
				want = append(want, fmt.Sprintf("%d to %d", bounds[i], bounds[i+1]))
			}
		}
		return fmt.Errorf("value %s must be %s", v, strings.Join(want, " or "))
	}
}

func doubleIn(lo, hi float64) func(string) error {
	return func(v string) error {
		if f, _ := strconv.ParseFloat(v, 64); f < lo || f > hi {
			return fmt.Errorf("value %s must be between %g and %g", v, lo, hi)
		}
		return nil
	}
}

func oneOf(vals ...string) func(string) error {
	return func(v string) error {
		for _, x := range vals {
			if v == x {
				return nil
			}
		}
		return fmt.Errorf("value %q must be one of %s", v, strings.Join(vals, ", "))
	}
}

// listOf accepts a non-empty comma-separated list of the given values.
func listOf(vals ...string) func(string) error {
	one := oneOf(vals...)
	return func(v string) error {
		items := SplitList(v)
		if len(items) == 0 {
			return fmt.Errorf("value must list at least one of %s", strings.Join(vals, ", "))
		}
		for _, x := range items {
			if err := one(x); err != nil {
				return err
			}
		}
		return nil
	}
}

var throttledItem = regexp.MustCompile(`^[0-9]+:[0-9]+$`)

// throttledReplicas accepts Kafka's throttled replica lists: empty, *, or
// partition:broker pairs.
func throttledReplicas(v string) error {
	items := SplitList(v)
	if len(items) == 1 && items[0] == "*" {
		return nil
	}
	for _, x := range items {
		if !throttledItem.MatchString(x) {
			return fmt.Errorf("value %q must be * or a list of partition:broker pairs", v)
		}
	}
	return nil
}

var formatVersion = regexp.MustCompile(`^[0-9]+\.[0-9]+(\.[0-9]+)?(-IV[0-9]+)?$`)

func messageFormat(v string) error {
	if !formatVersion.MatchString(v) {
		return fmt.Errorf("value %q is not a Kafka version (such as 3.0-IV1)", v)
	}
	return nil
}

// SplitList splits a list config's value at commas, trimming each item
// and leaving out empty ones.
func SplitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
