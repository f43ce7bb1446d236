package config_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/a2c-smcp/a2c-go/computer/config"
	"github.com/a2c-smcp/a2c-go/smcp"
)

func Example() {
	const doc = `
inputs:
  - {type: promptString, id: token, password: true}
servers:
  weather:
    name: Weather
    type: stdio
    tool_meta:
      get_forecast: {alias: forecast}
    server_parameters:
      command: weather-mcp
      env: {WEATHER_TOKEN: "${input:token}"}
`
	f, err := config.Parse([]byte(doc), "servers.yaml")
	if err != nil {
		log.Fatal(err)
	}
	s := f.Servers[0]
	fmt.Println(s.BundleID, s.ExposedName("get_forecast"))

	// The token comes from A2C_SMCP_token_Weather or A2C_SMCP_token.
	r := &config.Resolver{
		Inputs: f.Inputs,
		Env: func(name string) (string, bool) {
			if name == config.EnvName("token", s.BundleID, "") {
				return "s3cret", true
			}
			return "", false
		},
	}
	rendered, err := r.Render(context.Background(), s)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rendered.Stdio.Env["WEATHER_TOKEN"])

	// What client:get_config shows instead.
	b, _ := json.Marshal(rendered.Redact())
	fmt.Println(string(b))
	// Output:
	// Weather Weather__forecast
	// s3cret
	// {"name":"Weather","bundle_id":"Weather","type":"stdio","disabled":false,"forbidden_tools":[],"tool_meta":{"get_forecast":{"alias":"forecast"}},"server_parameters":{"command":"weather-mcp","env":{"WEATHER_TOKEN":"******"}}}
}

func ExampleServer_CheckAliases() {
	f, err := config.Parse([]byte(`{"name": "fs", "type": "stdio", "server_parameters": {"command": "fs-mcp"},
		"tool_meta": {"read_file": {"alias": "read"}}}`), "fs.json")
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range f.Servers[0].CheckAliases([]string{"read", "read_file", "write"}) {
		fmt.Println(d)
	}
	// Output:
	// server "fs": tool_meta.read_file.alias: tools "read" and "read_file" are both exposed as "fs__read"; only "read" is reachable
}

func ExampleRedacted() {
	pw := true
	inputs := config.Redacted([]smcp.MCPServerInput{
		{Type: smcp.InputPromptString, ID: "token", Password: &pw, Default: json.RawMessage(`"dev-token"`)},
	})
	b, _ := json.Marshal(inputs)
	fmt.Println(string(b))
	// Output:
	// [{"type":"promptString","id":"token","description":"","password":true}]
}
