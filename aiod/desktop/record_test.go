package desktop

import "testing"

// TestProgress: the recording's duration is ffmpeg's latest out_time_us,
// whatever the chunks its report arrives in.
func TestProgress(t *testing.T) {
	for _, tc := range []struct {
		name   string
		chunks []string
		want   float64
	}{
		{"none yet", []string{"frame=0\nout_time_us=N/A\n"}, 0},
		{"one report", []string{"frame=3\nout_time_us=100000\nprogress=continue\n"}, 0.1},
		{"latest wins", []string{"out_time_us=100000\n", "out_time_us=1500000\n"}, 1.5},
		{"split line", []string{"out_time", "_us=2", "50000\n"}, 0.25},
		{"unfinished line ignored", []string{"out_time_us=700000\nout_time_us=9"}, 0.7},
		{"negative ignored", []string{"out_time_us=-5\n"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p progress
			for _, c := range tc.chunks {
				if n, err := p.Write([]byte(c)); n != len(c) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", c, n, err)
				}
			}
			if got := p.seconds(); got != tc.want {
				t.Errorf("seconds = %v, want %v", got, tc.want)
			}
		})
	}
}
