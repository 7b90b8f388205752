// Package ids makes the random identifiers the bridge hands out.
package ids
