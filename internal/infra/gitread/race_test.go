//go:build race

package gitread

const raceEnabled = true
