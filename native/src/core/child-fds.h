// Descriptors a child process must not inherit.
//
// libfabric's providers open their sockets, epoll sets, eventfds and
// socketpairs without O_CLOEXEC, and the sockets provider does so on its own
// threads, so no list of them can be kept. A child that inherits one (fio, a
// mount helper, mkfs, anything spawned while a session is open) keeps the
// connection alive after this process closes it, and the peer never sees it
// go. So once the addon is loaded, every fork(2) marks all descriptors above
// stderr close-on-exec in the child. Node's spawn (libuv) then hands the child
// what it asked for itself: it dup2()s stdio and any extra pipes into place
// and clears close-on-exec on them (docs/transport.md, "Child processes").
#pragma once

namespace rblk {

// Registers the fork handler; once per process, however many times the addon is loaded.
void ProtectChildFds();

}  // namespace rblk
