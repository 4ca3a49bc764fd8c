//go:build !unix

package gitread

const oNonblock = 0
