//go:build !race

package gitread

const raceEnabled = false
