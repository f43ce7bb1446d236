package cli

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"text/tabwriter"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// computerSkills is one Computer's skill list, for --json output.
type computerSkills struct {
	Computer string             `json:"computer"`
	Skills   []smcp.A2CSkillRef `json:"skills"`
}

// runSkills is "a2c skills [--computer NAME] [--json]": the skills of
// every Computer of the office (or of the one named), in each Computer's
// discovery order.
func runSkills(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "skills")
	f := addAgentFlags(fs)
	only := fs.String("computer", "", "only this Computer")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError{"no arguments expected (a2c skill NAME reads one)"}
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	names, err := computers(ctx, c, *only)
	if err != nil {
		return err
	}
	all := []computerSkills{}
	for _, n := range names {
		skills, err := c.Skills(ctx, n)
		if err != nil {
			return fmt.Errorf("computer %s: %w", n, err)
		}
		if skills == nil {
			skills = []smcp.A2CSkillRef{}
		}
		all = append(all, computerSkills{Computer: n, Skills: skills})
	}
	if f.json {
		return printJSON(e, all)
	}
	if len(all) == 0 {
		fmt.Fprintf(e.stdout, "no Computer in office %s\n", f.office)
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COMPUTER\tNAME\tSOURCE\tDESCRIPTION")
	for _, cs := range all {
		for _, s := range cs.Skills {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", cs.Computer, s.Name, s.Source, firstLine(s.Description, 80))
		}
	}
	return tw.Flush()
}

// skillFile is a2c skill's --json output: the get_skill answer, the
// Computer it came from, and for a file served by handle its bytes.
type skillFile struct {
	Computer string `json:"computer"`
	smcp.GetSkillRet
	// Blob is the base64 of a file read through its blob handle.
	Blob string `json:"blob,omitempty"`
}

// runSkill is "a2c skill NAME [REL_PATH] [--computer NAME] [--json]": it
// prints one file of a skill (SKILL.md without its frontmatter by
// default) as it is, reading a large or binary file through its blob
// handle, and checks the file's sha256 either way. Without --computer
// the skill is looked for among the office's Computers.
func runSkill(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "skill")
	f := addAgentFlags(fs)
	only := fs.String("computer", "", "Computer to read from (default: the one that lists the skill)")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		return usageError{"a skill NAME is required, and at most one REL_PATH"}
	}
	name, rel := fs.Arg(0), fs.Arg(1)
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	computer := *only
	if computer == "" {
		if computer, err = findSkill(ctx, c, name); err != nil {
			return err
		}
	}
	ret, err := c.Skill(ctx, computer, name, rel)
	if err != nil {
		return skillError(err, name, computer)
	}
	var data []byte
	switch {
	case ret.Body != nil:
		data = []byte(*ret.Body)
	case ret.BlobHandle != nil:
		if data, _, err = c.Blob(ctx, computer, *ret.BlobHandle, 0); err != nil {
			return fmt.Errorf("read %s %s through its blob handle: %w", name, ret.RelPath, err)
		}
	default:
		return fmt.Errorf("computer %s answered neither body nor blob_handle", computer)
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != ret.SHA256 || int64(len(data)) != ret.TotalSize {
		return fmt.Errorf("%s %s: content does not match its sha256/total_size", name, ret.RelPath)
	}
	if f.json {
		out := skillFile{Computer: computer, GetSkillRet: *ret}
		if ret.BlobHandle != nil {
			out.Blob = base64.StdEncoding.EncodeToString(data)
		}
		return printJSON(e, out)
	}
	_, err = e.stdout.Write(data)
	return err
}

// findSkill finds the Computer of the office that lists skill name.
func findSkill(ctx context.Context, c *agent.Client, name string) (string, error) {
	return findComputer(ctx, c, func(computer string) bool {
		skills, err := c.Skills(ctx, computer)
		return err == nil && slices.ContainsFunc(skills, func(s smcp.A2CSkillRef) bool { return s.Name == name })
	}, fmt.Sprintf("no Computer in the office lists the skill %q (see a2c skills)", name))
}

// skillError says what a get_skill refusal means.
func skillError(err error, name, computer string) error {
	var pe *smcp.Error
	if !errors.As(err, &pe) {
		return err
	}
	switch pe.Code {
	case smcp.CodeInvalidSkillName:
		return fmt.Errorf("%q is not a valid skill name: %w", name, err)
	case smcp.CodeMCPServerNotFound:
		return fmt.Errorf("computer %s has no skill %q (see a2c skills): %w", computer, name, err)
	case smcp.CodeSkillNotAccessible:
		return fmt.Errorf("%w (%s)", err, pe.Reason())
	}
	return err
}
