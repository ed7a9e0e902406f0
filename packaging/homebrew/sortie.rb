# Homebrew formula for sortie, as a template: scripts/release.sh writes dist/sortie.rb from it
# with the release's version, archive URL and SHA-256 (the @NAME@ fields), to be copied into a
# tap. Releases carry a static Linux x86_64 binary only, hence `depends_on :linux`.
class Sortie < Formula
  desc "Turns issue-tracker tickets into autonomous coding-agent sessions"
  homepage "@HOMEPAGE@"
  version "@VERSION@"
  license "Apache-2.0"

  depends_on :linux

  on_linux do
    on_intel do
      url "@URL_X86_64_LINUX@"
      sha256 "@SHA256_X86_64_LINUX@"
    end
  end

  def install
    bin.install "sortie"
  end

  test do
    assert_match "sortie #{version} (linux/", shell_output("#{bin}/sortie --version")
    (testpath/"issues.json").write <<~JSON
      [{"id": "1", "identifier": "T-1", "title": "Try sortie", "state": "Todo"}]
    JSON
    (testpath/"WORKFLOW.md").write <<~MD
      ---
      tracker:
        kind: file
        active_states: [Todo]
        terminal_states: [Done]
      file:
        path: ./issues.json
      agent:
        kind: mock
      ---
      Work on {{ .issue.identifier }}: {{ .issue.title }}
    MD
    system bin/"sortie", "validate", testpath/"WORKFLOW.md"
    assert_match "T-1", shell_output("#{bin}/sortie --dry-run #{testpath}/WORKFLOW.md")
  end
end
