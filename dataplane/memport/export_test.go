package memport

// SetArmDelay sets the hook Arm runs between arming and looking at the
// rings (nil: none). Not safe while ports are in use.
func SetArmDelay(f func()) { armDelay = f }
