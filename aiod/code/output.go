package code

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Output types of the notebook output list.
const (
	OutputStream        = "stream"
	OutputExecuteResult = "execute_result"
	OutputDisplayData   = "display_data"
	OutputError         = "error"
)

// Output is one entry of a run's notebook output list. On v2 only the
// keys its OutputType uses are written; [Output.V1] has every key.
type Output struct {
	OutputType string
	// Name (stdout or stderr) and Text: a stream.
	Name, Text string
	// Data (a mime bundle) and Metadata: an execute_result or a
	// display_data; ExecutionCount: an execute_result.
	Data           map[string]json.RawMessage
	Metadata       json.RawMessage
	ExecutionCount *int
	// Ename, Evalue and Traceback: an error.
	Ename, Evalue string
	Traceback     []string
}

// marshal encodes v as serde does: &, < and > unescaped.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

func (o Output) metadata() json.RawMessage {
	if len(o.Metadata) == 0 {
		return json.RawMessage("{}")
	}
	return o.Metadata
}

func (o Output) traceback() []string {
	if o.Traceback == nil {
		return []string{}
	}
	return o.Traceback
}

// MarshalJSON writes the keys of the output's type.
func (o Output) MarshalJSON() ([]byte, error) {
	switch o.OutputType {
	case OutputStream:
		return marshal(struct {
			OutputType string `json:"output_type"`
			Name       string `json:"name"`
			Text       string `json:"text"`
		}{o.OutputType, o.Name, o.Text})
	case OutputError:
		return marshal(struct {
			OutputType string   `json:"output_type"`
			Ename      string   `json:"ename"`
			Evalue     string   `json:"evalue"`
			Traceback  []string `json:"traceback"`
		}{o.OutputType, o.Ename, o.Evalue, o.traceback()})
	case OutputExecuteResult:
		return marshal(struct {
			OutputType     string                     `json:"output_type"`
			Data           map[string]json.RawMessage `json:"data"`
			ExecutionCount *int                       `json:"execution_count"`
			Metadata       json.RawMessage            `json:"metadata"`
		}{o.OutputType, o.Data, o.ExecutionCount, o.metadata()})
	}
	return marshal(struct {
		OutputType string                     `json:"output_type"`
		Data       map[string]json.RawMessage `json:"data"`
		Metadata   json.RawMessage            `json:"metadata"`
	}{o.OutputType, o.Data, o.metadata()})
}

// V1Output is an output as the v1 routes write it: all nine keys, null
// where the type does not use them.
type V1Output struct {
	Data           map[string]json.RawMessage `json:"data"`
	Ename          *string                    `json:"ename"`
	Evalue         *string                    `json:"evalue"`
	ExecutionCount *int                       `json:"execution_count"`
	Metadata       json.RawMessage            `json:"metadata"`
	Name           *string                    `json:"name"`
	OutputType     string                     `json:"output_type"`
	Text           *string                    `json:"text"`
	Traceback      []string                   `json:"traceback"`
}

// V1 returns the v1 form of o.
func (o Output) V1() V1Output {
	v := V1Output{OutputType: o.OutputType, Metadata: json.RawMessage("null")}
	switch o.OutputType {
	case OutputStream:
		v.Name, v.Text = &o.Name, &o.Text
	case OutputError:
		v.Ename, v.Evalue, v.Traceback = &o.Ename, &o.Evalue, o.traceback()
	default:
		v.Data, v.Metadata, v.ExecutionCount = o.Data, o.metadata(), o.ExecutionCount
	}
	return v
}

// errorOutput is an error output with no traceback.
func errorOutput(ename, evalue string) Output {
	return Output{OutputType: OutputError, Ename: ename, Evalue: evalue, Traceback: []string{}}
}

// DefaultMaxOutputChars caps the output of one cell.
const DefaultMaxOutputChars = 2_000_000

// truncationSlack is how much output past the cap still arrives after
// the truncation note.
const truncationSlack = 64 << 10

// collector gathers a cell's outputs under the character cap: a stream
// crossing it keeps its head, then a stderr note; later outputs arrive
// while they fit in truncationSlack; an output over the budget is
// dropped whole. Adjacent stream chunks of one name are merged.
type collector struct {
	max       int
	used      int
	truncated bool
	outputs   []Output
}

func (c *collector) budget() int {
	if c.truncated {
		return c.max + truncationSlack - c.used
	}
	return c.max - c.used
}

func (c *collector) note() {
	c.truncated = true
	c.appendStream("stderr", fmt.Sprintf("[output truncated at %d characters]\n", c.max))
}

func (c *collector) appendStream(name, text string) {
	if n := len(c.outputs); n > 0 && c.outputs[n-1].OutputType == OutputStream && c.outputs[n-1].Name == name {
		c.outputs[n-1].Text += text
		return
	}
	c.outputs = append(c.outputs, Output{OutputType: OutputStream, Name: name, Text: text})
}

// stream adds stream text.
func (c *collector) stream(name, text string) {
	if text == "" {
		return
	}
	n := utf8.RuneCountInString(text)
	if n <= c.budget() {
		c.used += n
		c.appendStream(name, text)
		return
	}
	if c.truncated {
		return
	}
	head := headRunes(text, c.budget())
	c.used = c.max
	c.appendStream(name, head)
	c.note()
}

// headRunes is the first n runes of s.
func headRunes(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}

// add adds a non-stream output, dropping it whole when it does not fit.
func (c *collector) add(o Output) {
	n := len(o.Ename) + len(o.Evalue) + len(strings.Join(o.Traceback, ""))
	for _, v := range o.Data {
		n += len(v)
	}
	if n > c.budget() {
		if !c.truncated {
			c.used = c.max
			c.note()
		}
		return
	}
	c.used += n
	c.outputs = append(c.outputs, o)
}

// streams joins the stream text of each name.
func streams(outs []Output) (stdout, stderr string) {
	var o, e strings.Builder
	for _, x := range outs {
		if x.OutputType != OutputStream {
			continue
		}
		if x.Name == "stderr" {
			e.WriteString(x.Text)
		} else {
			o.WriteString(x.Text)
		}
	}
	return o.String(), e.String()
}
