package commands

// TruncateOutput words a stream as the run routes do past
// max_output_length: more than max characters (max 0: no limit) keep their
// first and last max/2 around "\n... output truncated ...\n". The MCP
// tool sandbox_execute_bash words its output with it.
func TruncateOutput(s string, max int) string { return truncateMiddle(s, max, truncMarker) }
