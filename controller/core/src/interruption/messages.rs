//! EventBridge message shapes delivered to the interruption queue, shared by the controller (which
//! parses them) and fakecloud (which emits them).
