package desktop_test

import (
	"fmt"

	"github.com/a2c-smcp/a2c-go/desktop"
)

func ExampleParseURI() {
	u, err := desktop.ParseURI("window://com.example.editor/src%2Fmain/file%20name?priority=80")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("host %s, path %q, dropped query %q\n", u.Host, u.Path, u.Query)
	fmt.Println(u)
	// Output:
	// host com.example.editor, path ["src/main" "file name"], dropped query "priority=80"
	// window://com.example.editor/src%2Fmain/file%20name
}

func ExampleOrganize() {
	windows := []desktop.Window{
		{URI: "window://com.example.logger", Server: "logger", Texts: []string{"INFO: done"}},
		{URI: "window://com.example.browser/side", Server: "browser", Texts: []string{"links"}, Priority: 0.2},
		{URI: "window://com.example.browser/main", Server: "browser", Texts: []string{"<html>…</html>"}, Priority: 0.8},
		{URI: "window://com.example.browser/img", Server: "browser", Texts: nil}, // blob only: skipped
	}
	size := 2
	for _, e := range desktop.Organize(windows, desktop.Options{
		Size:    &size,
		History: []string{"browser", "logger"}, // logger was used last
	}) {
		fmt.Printf("%q\n", e)
	}
	// Output:
	// "window://com.example.logger\n\nINFO: done"
	// "window://com.example.browser/main\n\n<html>…</html>"
}
