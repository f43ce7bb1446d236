package config

import (
	"errors"
	"math"
	"time"
)

// ParseISODuration parses an ISO 8601 duration of the form PnWnDTnHnMnS,
// the form of the timeouts of a streamable server: "PT30S", "PT5M",
// "P1DT2H", "PT0.5S". Every component is optional, but at least one must be
// present, components appear in that order, and "T" separates days from
// hours. Only seconds may have a fraction (with '.' or ','); digits past
// nanoseconds are dropped. A week is 7 days and a day 24 hours. Years and
// months (whose length varies), negative durations and durations beyond
// [time.Duration]'s range are errors.
func ParseISODuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, errors.New("empty duration")
	}
	if s[0] == '-' || s[0] == '+' {
		if s[0] == '-' {
			return 0, errors.New("negative duration")
		}
		s = s[1:]
	}
	if s == "" || s[0] != 'P' {
		return 0, errors.New(`an ISO 8601 duration starts with "P"`)
	}
	s = s[1:]
	var total int64
	// rank orders the designators; each may appear once, in this order.
	rank := map[byte]int{'W': 1, 'D': 2, 'H': 4, 'M': 5, 'S': 6}
	unit := map[byte]int64{
		'W': 7 * 24 * int64(time.Hour), 'D': 24 * int64(time.Hour),
		'H': int64(time.Hour), 'M': int64(time.Minute), 'S': int64(time.Second),
	}
	last, inTime, found, timeFound := 0, false, false, false
	for len(s) > 0 {
		if s[0] == 'T' {
			if inTime {
				return 0, errors.New(`"T" appears twice`)
			}
			inTime, last, s = true, 3, s[1:]
			continue
		}
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == 0 {
			return 0, errors.New("expected a number")
		}
		whole, frac := s[:i], ""
		s = s[i:]
		if len(s) > 0 && (s[0] == '.' || s[0] == ',') {
			j := 1
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			if j == 1 {
				return 0, errors.New("expected digits after the decimal mark")
			}
			frac, s = s[1:j], s[j:]
		}
		if len(s) == 0 {
			return 0, errors.New("a number lacks its designator")
		}
		d := s[0]
		s = s[1:]
		if !inTime && (d == 'Y' || d == 'M') {
			return 0, errors.New("years and months are not supported")
		}
		r, ok := rank[d]
		if !ok || (r > 3) != inTime {
			return 0, errors.New("unexpected designator")
		}
		if r <= last {
			return 0, errors.New("designators out of order or repeated")
		}
		if frac != "" && d != 'S' {
			return 0, errors.New("only seconds may have a fraction")
		}
		last = r
		found = true
		if inTime {
			timeFound = true
		}
		v, ok := component(whole, frac, unit[d])
		if !ok || v > math.MaxInt64-total {
			return 0, errors.New("duration out of range")
		}
		total += v
	}
	if inTime && !timeFound {
		return 0, errors.New(`"T" must be followed by hours, minutes or seconds`)
	}
	if !found {
		return 0, errors.New("no components")
	}
	return time.Duration(total), nil
}

// component returns whole.frac times unit (in nanoseconds), or false on
// overflow. frac is at most meaningful to the nanosecond.
func component(whole, frac string, unit int64) (int64, bool) {
	var n int64
	for i := 0; i < len(whole); i++ {
		d := int64(whole[i] - '0')
		if n > (math.MaxInt64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	if n > math.MaxInt64/unit {
		return 0, false
	}
	n *= unit
	// The fraction applies to seconds only, so unit is time.Second and
	// nine digits reach the nanosecond.
	var f, scale int64 = 0, unit
	for i := 0; i < len(frac) && scale > 1; i++ {
		scale /= 10
		f += int64(frac[i]-'0') * scale
	}
	if f > math.MaxInt64-n {
		return 0, false
	}
	return n + f, true
}
