package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/a2c-smcp/a2c-go/agent"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// putResult is what "a2c put --json" prints.
type putResult struct {
	Computer    string `json:"computer"`
	LandingPath string `json:"landing_path"`
	TotalSize   int64  `json:"total_size"`
	SHA256      string `json:"sha256"`
	UploadID    string `json:"upload_id"`
}

// runPut is "a2c put FILE [--to NAME] [--as NAME_HINT] [--json]": it
// uploads FILE to a Computer's landing root through client:put_blob and
// prints the absolute path it landed at on the Computer's disk.
func runPut(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "put")
	f := addAgentFlags(fs)
	var to string
	fs.StringVar(&to, "to", "", "Computer to upload to (default: the office's only Computer)")
	fs.StringVar(&to, "computer", "", "same as --to")
	hint := fs.String("as", "", "file name to suggest to the Computer (default FILE's base name)")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{"exactly one FILE is required"}
	}
	path := fs.Arg(0)
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file", path)
	case fi.Size() == 0:
		return fmt.Errorf("%s is empty: there is nothing to upload", path)
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	computer := to
	if computer == "" {
		names, err := computers(ctx, c, "")
		if err != nil {
			return err
		}
		switch len(names) {
		case 0:
			return errors.New("no Computer in the office")
		case 1:
			computer = names[0]
		default:
			return fmt.Errorf("the office has %d Computers (%s); choose one with --to", len(names), strings.Join(names, ", "))
		}
	}
	name := *hint
	if name == "" {
		name = filepath.Base(path)
	}
	if !f.json {
		fmt.Fprintf(e.stderr, "uploading %s (%d bytes) to %s\n", path, fi.Size(), computer)
	}
	ret, err := c.PutFile(ctx, computer, path, agent.PutOptions{NameHint: name})
	if err != nil {
		return putError(computer, err)
	}
	if f.json {
		return printJSON(e, putResult{Computer: computer, LandingPath: ret.LandingPath, TotalSize: *ret.TotalSize,
			SHA256: ret.SHA256, UploadID: ret.UploadID})
	}
	fmt.Fprintln(e.stdout, ret.LandingPath)
	return nil
}

// putError says what a refused upload means for the user.
func putError(computer string, err error) error {
	var pe *smcp.Error
	if !errors.As(err, &pe) || pe.Code != smcp.CodeBlobWriteFailed {
		return err
	}
	why := map[string]string{
		smcp.ReasonForbidden:          "it accepts no uploads (start it with --landing-root DIR)",
		smcp.ReasonTooLarge:           "the file is larger than it accepts",
		smcp.ReasonBusy:               "it has too many uploads in progress; try again later",
		smcp.ReasonIntegrity:          "the bytes it received do not match the file's SHA-256 (did the file change?)",
		smcp.ReasonIOError:            "it could not write the file",
		smcp.ReasonInvalidUpload:      "it no longer knows the upload (it expired or the Computer restarted); try again",
		smcp.ReasonRange:              "the chunks arrived out of order or the file changed size; try again",
		smcp.ReasonInvalidDeclaration: "it refused the upload's declaration",
	}[pe.Reason()]
	if why == "" {
		why = "reason " + pe.Reason()
	}
	return fmt.Errorf("%s refused the upload (4019 %s): %s", computer, pe.Reason(), why)
}
