#include "errors.h"

#include <rdma/fi_errno.h>
#include <cerrno>
#include <cstring>

namespace rblk {

namespace {

struct Name {
  int err;
  const char* name;
};

// libfabric's own codes (fi_errno.h) that are not plain errno values, then
// the errno values libfabric reuses, named with the FI_ prefix it gives them.
const Name kFabricNames[] = {
    {FI_EOTHER, "FI_EOTHER"},       {FI_ETOOSMALL, "FI_ETOOSMALL"}, {FI_EOPBADSTATE, "FI_EOPBADSTATE"},
    {FI_EAVAIL, "FI_EAVAIL"},       {FI_EBADFLAGS, "FI_EBADFLAGS"}, {FI_ENOEQ, "FI_ENOEQ"},
    {FI_EDOMAIN, "FI_EDOMAIN"},     {FI_ENOCQ, "FI_ENOCQ"},         {FI_ECRC, "FI_ECRC"},
    {FI_ETRUNC, "FI_ETRUNC"},       {FI_ENOKEY, "FI_ENOKEY"},       {FI_ENOAV, "FI_ENOAV"},
    {FI_EOVERRUN, "FI_EOVERRUN"},   {FI_ENORX, "FI_ENORX"},
    {FI_EPERM, "FI_EPERM"},         {FI_ENOENT, "FI_ENOENT"},       {FI_EINTR, "FI_EINTR"},
    {FI_EIO, "FI_EIO"},             {FI_E2BIG, "FI_E2BIG"},         {FI_EBADF, "FI_EBADF"},
    {FI_EAGAIN, "FI_EAGAIN"},       {FI_ENOMEM, "FI_ENOMEM"},       {FI_EACCES, "FI_EACCES"},
    {FI_EFAULT, "FI_EFAULT"},       {FI_EBUSY, "FI_EBUSY"},         {FI_ENODEV, "FI_ENODEV"},
    {FI_EINVAL, "FI_EINVAL"},       {FI_EMFILE, "FI_EMFILE"},       {FI_ENOSPC, "FI_ENOSPC"},
    {FI_ENOSYS, "FI_ENOSYS"},       {FI_EWOULDBLOCK, "FI_EAGAIN"},  {FI_ENOMSG, "FI_ENOMSG"},
    {FI_ENODATA, "FI_ENODATA"},     {FI_EOVERFLOW, "FI_EOVERFLOW"}, {FI_EMSGSIZE, "FI_EMSGSIZE"},
    {FI_ENOPROTOOPT, "FI_ENOPROTOOPT"}, {FI_EOPNOTSUPP, "FI_EOPNOTSUPP"}, {FI_EADDRINUSE, "FI_EADDRINUSE"},
    {FI_EADDRNOTAVAIL, "FI_EADDRNOTAVAIL"}, {FI_ENETDOWN, "FI_ENETDOWN"}, {FI_ENETUNREACH, "FI_ENETUNREACH"},
    {FI_ECONNABORTED, "FI_ECONNABORTED"}, {FI_ECONNRESET, "FI_ECONNRESET"}, {FI_ENOBUFS, "FI_ENOBUFS"},
    {FI_EISCONN, "FI_EISCONN"},     {FI_ENOTCONN, "FI_ENOTCONN"},   {FI_ESHUTDOWN, "FI_ESHUTDOWN"},
    {FI_ETIMEDOUT, "FI_ETIMEDOUT"}, {FI_ECONNREFUSED, "FI_ECONNREFUSED"}, {FI_EHOSTDOWN, "FI_EHOSTDOWN"},
    {FI_EHOSTUNREACH, "FI_EHOSTUNREACH"}, {FI_EALREADY, "FI_EALREADY"}, {FI_EINPROGRESS, "FI_EINPROGRESS"},
    {FI_EREMOTEIO, "FI_EREMOTEIO"}, {FI_ECANCELED, "FI_ECANCELED"}, {FI_EKEYREJECTED, "FI_EKEYREJECTED"},
};

}  // namespace

std::string FabricErrorName(int err) {
  for (const auto& n : kFabricNames)
    if (n.err == err) return n.name;
  return "FI_E" + std::to_string(err);
}

std::string FabricErrorMessage(int err) { return fi_strerror(err); }

std::string SystemErrorName(int err) {
  const char* name = strerrorname_np(err);
  return name ? name : "E" + std::to_string(err);
}

Napi::Error MakeError(Napi::Env env, int err, const std::string& op, bool fabric) {
  std::string code = fabric ? FabricErrorName(err) : SystemErrorName(err);
  std::string text = fabric ? FabricErrorMessage(err) : std::string(strerror(err));
  Napi::Error e = Napi::Error::New(env, op + ": " + text + " (" + code + ")");
  e.Set("code", Napi::String::New(env, code));
  e.Set("errno", Napi::Number::New(env, err));
  e.Set("op", Napi::String::New(env, op));
  return e;
}

Napi::Error MakeUsageError(Napi::Env env, const std::string& code, int err, const std::string& op,
                           const std::string& message) {
  Napi::Error e = Napi::Error::New(env, op + ": " + message);
  e.Set("code", Napi::String::New(env, code));
  e.Set("errno", Napi::Number::New(env, err));
  e.Set("op", Napi::String::New(env, op));
  return e;
}

}  // namespace rblk
