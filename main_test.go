package main

import "testing"

func TestExtraProc(t *testing.T) {
	tests := []struct {
		name  string
		env   string
		procs int
		want  int
	}{
		{"default: one more than the CPUs", "", 2, 3},
		{"one CPU", "", 1, 2},
		{"the operator's GOMAXPROCS stands", "2", 2, 0},
		{"even when it is odd", "7", 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == "GOMAXPROCS" {
					return tt.env
				}
				return ""
			}
			if got := extraProc(getenv, tt.procs); got != tt.want {
				t.Errorf("extraProc(GOMAXPROCS=%q, %d) = %d, want %d", tt.env, tt.procs, got, tt.want)
			}
		})
	}
}
