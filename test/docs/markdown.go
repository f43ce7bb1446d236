package docs

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
)

// Block is one fenced block of a markdown file.
type Block struct {
	Line     int       // the line of its opening fence, from 1
	Lang     string    // the first word of the info string
	File     string    // file=REL of the info string, "" without
	Body     string    // its lines, each ending in "\n"
	Commands []Command // for a console block, its commands in order
}

// Command is one "$ " command of a console block and the output it must
// print.
type Command struct {
	Line int      // the line of its "$ "
	Text string   // the command, continuation lines joined with "\n"
	Want []string // the expected lines, "..." and placeholders included
	Exit int      // the expected exit status ([exit N], else 0)
}

// shellLangs are the block languages that show commands without output.
var shellLangs = map[string]bool{"sh": true, "bash": true, "shell": true}

// outputComment is a line of a sh block that shows output as a comment,
// the form the test replaces with console blocks.
var outputComment = regexp.MustCompile(`^\s*# [\[{]`)

var exitLine = regexp.MustCompile(`^\[exit (\d+)\]$`)

// Parse returns the fenced blocks of a markdown file and the first
// malformed one as an error naming its line: an unclosed fence, a fence
// with no language, a console block that does not start with a command,
// an empty command, a continuation at the end of a block, output shown
// in a sh block, or a file= path that leaves the working folder.
func Parse(src string) ([]Block, error) {
	lines := strings.Split(src, "\n")
	var blocks []Block
	for i := 0; i < len(lines); i++ {
		indent, fence, info, ok := openFence(lines[i])
		if !ok {
			continue
		}
		b := Block{Line: i + 1}
		fields := strings.Fields(info)
		if len(fields) == 0 {
			return nil, fmt.Errorf("line %d: a fence with no language (write ```console, ```sh, ```text, ...)", b.Line)
		}
		b.Lang = fields[0]
		for _, f := range fields[1:] {
			if rel, ok := strings.CutPrefix(f, "file="); ok {
				if rel == "" || path.IsAbs(rel) || path.Clean(rel) != rel || strings.HasPrefix(rel, "..") {
					return nil, fmt.Errorf("line %d: file=%q must be a clean relative path", b.Line, rel)
				}
				b.File = rel
			}
		}
		closed := false
		var body strings.Builder
		for i++; i < len(lines); i++ {
			if strings.TrimSpace(lines[i]) == fence {
				closed = true
				break
			}
			body.WriteString(strings.TrimPrefix(lines[i], indent) + "\n")
		}
		if !closed {
			return nil, fmt.Errorf("line %d: the block is not closed", b.Line)
		}
		b.Body = body.String()
		switch {
		case b.Lang == "console":
			cmds, err := parseConsole(b.Body, b.Line+1)
			if err != nil {
				return nil, err
			}
			b.Commands = cmds
		case shellLangs[b.Lang]:
			for j, l := range strings.Split(b.Body, "\n") {
				if strings.HasPrefix(l, "$ ") || outputComment.MatchString(l) {
					return nil, fmt.Errorf("line %d: a %s block shows a prompt or output; make it a ```console block, which is run", b.Line+1+j, b.Lang)
				}
			}
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// openFence reports whether line opens a fenced block (three or more
// backticks after any indentation, as in a list item), and returns the
// indentation, which the block's lines lose, the fence and its info
// string.
func openFence(line string) (indent, fence, info string, ok bool) {
	rest := strings.TrimLeft(line, " ")
	indent = line[:len(line)-len(rest)]
	n := 0
	for n < len(rest) && rest[n] == '`' {
		n++
	}
	if n < 3 {
		return "", "", "", false
	}
	return indent, rest[:n], strings.TrimSpace(rest[n:]), true
}

// parseConsole splits a console block's body into its commands; first is
// the file line of the body's first line.
func parseConsole(body string, first int) ([]Command, error) {
	if strings.TrimSpace(body) == "" {
		return nil, fmt.Errorf("line %d: an empty console block", first-1)
	}
	lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
	var cmds []Command
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		text, isCmd := strings.CutPrefix(l, "$ ")
		if !isCmd {
			if len(cmds) == 0 {
				return nil, fmt.Errorf("line %d: a console block must start with a \"$ \" command", first+i)
			}
			c := &cmds[len(cmds)-1]
			c.Want = append(c.Want, strings.TrimRight(l, " \t"))
			continue
		}
		c := Command{Line: first + i, Text: text}
		for strings.HasSuffix(c.Text, "\\") {
			if i+1 >= len(lines) {
				return nil, fmt.Errorf("line %d: a continued command ends the block", first+i)
			}
			i++
			c.Text += "\n" + lines[i]
		}
		if strings.TrimSpace(c.Text) == "" {
			return nil, fmt.Errorf("line %d: an empty command", c.Line)
		}
		cmds = append(cmds, c)
	}
	for k := range cmds {
		c := &cmds[k]
		if n := len(c.Want); n > 0 {
			if m := exitLine.FindStringSubmatch(c.Want[n-1]); m != nil {
				c.Exit, _ = strconv.Atoi(m[1])
				c.Want = c.Want[:n-1]
			}
		}
	}
	return cmds, nil
}

// placeholders maps each placeholder to the expression it matches.
var placeholders = map[string]string{
	"<any>":  `.*`,
	"<n>":    `-?[0-9]+(?:\.[0-9]+)?`,
	"<hex>":  `[0-9a-f]+`,
	"<uuid>": `[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`,
	"<id>":   `[A-Za-z0-9_-]+`,
	"<path>": `/[^\s"',]*`,
}

var placeholderRE = regexp.MustCompile(`<(?:any|n|hex|uuid|id|path)>`)

// lineRE turns an expected line into an anchored expression: placeholders
// become their patterns, everything else is literal.
func lineRE(want string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	last := 0
	for _, m := range placeholderRE.FindAllStringIndex(want, -1) {
		b.WriteString(regexp.QuoteMeta(want[last:m[0]]))
		b.WriteString(placeholders[want[m[0]:m[1]]])
		last = m[1]
	}
	b.WriteString(regexp.QuoteMeta(want[last:]))
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// Match holds got (a command's output) to the expected lines and returns
// nil, or an error naming the first expected line that nothing matched.
func Match(want []string, got string) error {
	gotLines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if got == "" {
		gotLines = nil
	}
	for i := range gotLines {
		gotLines[i] = strings.TrimRight(gotLines[i], " \t\r")
	}
	res := make([]*regexp.Regexp, len(want))
	for i, w := range want {
		if w != "..." {
			res[i] = lineRE(w)
		}
	}
	// ok[i][j]: want[i:] matches gotLines[j:]; best records how far into
	// want any alignment got, for the error.
	type key struct{ i, j int }
	memo := map[key]bool{}
	best := 0
	var match func(i, j int) bool
	match = func(i, j int) bool {
		if v, seen := memo[key{i, j}]; seen {
			return v
		}
		best = max(best, i)
		var ok bool
		switch {
		case i == len(want):
			ok = j == len(gotLines)
		case want[i] == "...":
			ok = match(i+1, j) || (j < len(gotLines) && match(i, j+1))
		default:
			ok = j < len(gotLines) && res[i].MatchString(gotLines[j]) && match(i+1, j+1)
		}
		memo[key{i, j}] = ok
		return ok
	}
	if match(0, 0) {
		return nil
	}
	if best < len(want) {
		return fmt.Errorf("no output line matches expected line %d %q", best+1, want[best])
	}
	return fmt.Errorf("the output goes on past the expected lines")
}

var (
	linkRE    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRE = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	slugDrop  = regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
)

// Links returns the relative link targets of a markdown file (no scheme,
// no "<...>" autolink), as written: "page.md", "page.md#anchor", "#anchor".
func Links(src string) []string {
	var out []string
	for _, m := range linkRE.FindAllStringSubmatch(src, -1) {
		if l := m[1]; !strings.Contains(l, "://") && !strings.HasPrefix(l, "mailto:") {
			out = append(out, l)
		}
	}
	return out
}

// Anchors returns the anchors GitHub gives a file's headings: lower case,
// punctuation dropped, spaces as '-'.
func Anchors(src string) map[string]bool {
	out := map[string]bool{}
	for _, m := range headingRE.FindAllStringSubmatch(src, -1) {
		a := slugDrop.ReplaceAllString(strings.ToLower(strings.TrimSpace(m[1])), "")
		out[strings.ReplaceAll(a, " ", "-")] = true
	}
	return out
}
