//go:build race

package gitwalk

const raceEnabled = true
