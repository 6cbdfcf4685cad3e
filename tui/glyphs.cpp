#include "tui/glyphs.h"

#include <langinfo.h>
#include <locale.h>
#include <strings.h>

namespace partrain::tui {
namespace {

constexpr Glyphs kUtf8Glyphs = {
    U'█',
    U'▒',
    U'░',
    U'·',
    U'?',
    {U'█', U'▓', U'▒', U'░', U'≡', U'─', U'·'},  // params grads optimizer activations comm ws other
    U'│',
    U'┄',
    U'─',
    U'│',
    U'◆',
    {U'┌', U'┐', U'└', U'┘'},
    {U'▁', U'▂', U'▃', U'▄', U'▅', U'▆', U'▇', U'█'}};

constexpr Glyphs kAsciiGlyphs = {U'#',
                                 U'=',
                                 U'~',
                                 U'.',
                                 U'?',
                                 {U'P', U'G', U'O', U'A', U'C', U'W', U'o'},
                                 U'|',
                                 U'-',
                                 U'-',
                                 U'|',
                                 U'*',
                                 {U'+', U'+', U'+', U'+'},
                                 {U'_', U'.', U',', U':', U'-', U'=', U'+', U'#'}};

}  // namespace

const Glyphs& glyphs_for(Charset charset) {
  return charset == Charset::kUtf8 ? kUtf8Glyphs : kAsciiGlyphs;
}

Charset charset_from_locale() {
  // The environment's locale (LC_ALL, LC_CTYPE, LANG), read without changing the process's.
  locale_t locale = newlocale(LC_CTYPE_MASK, "", static_cast<locale_t>(nullptr));
  if (locale == static_cast<locale_t>(nullptr)) return Charset::kAscii;
  const char* codeset = nl_langinfo_l(CODESET, locale);
  const bool utf8 = codeset != nullptr &&
                    (strcasecmp(codeset, "UTF-8") == 0 || strcasecmp(codeset, "utf8") == 0);
  freelocale(locale);
  return utf8 ? Charset::kUtf8 : Charset::kAscii;
}

}  // namespace partrain::tui
