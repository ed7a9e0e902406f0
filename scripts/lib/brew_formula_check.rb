# Runs a Homebrew formula's install and test blocks without Homebrew, against a local release
# directory: the part of Homebrew's formula DSL that packaging/homebrew/sortie.rb uses, so a
# formula that names the wrong archive, carries the wrong checksum, installs nothing or fails
# its own test is caught before it reaches a tap. (`ruby -c` checks only the syntax.)
#
# Usage: ruby scripts/lib/brew_formula_check.rb FORMULA.rb DIST_DIR VERSION
require "digest"
require "fileutils"
require "open3"
require "pathname"
require "tmpdir"

class FormulaCheckError < StandardError; end

# Homebrew's Pathname#install: moves files into the directory.
class Pathname
  def install(*files)
    mkpath
    files.flatten.each { |f| FileUtils.mv(f.to_s, (self / File.basename(f.to_s)).to_s) }
  end
end

class Formula
  class << self
    attr_reader :fields, :test_block

    def inherited(sub)
      super
      @last = sub
    end

    def last_defined = @last

    def field(name, value)
      (@fields ||= {})[name] = value
    end

    %i[desc homepage version license url sha256].each do |name|
      define_method(name) { |value, **_opts| field(name, value) }
    end

    def depends_on(*deps) = field(:depends_on, deps)
    def on_linux = yield
    def on_intel = yield
    def on_macos; end
    def on_arm; end
    def livecheck; end

    def test(&block)
      @test_block = block
    end
  end

  attr_reader :prefix, :testpath

  def initialize(prefix)
    @prefix = Pathname(prefix)
  end

  def bin = prefix / "bin"
  def version = self.class.fields.fetch(:version)

  def run_test(dir)
    @testpath = Pathname(dir)
    Dir.chdir(dir) { instance_eval(&self.class.test_block) }
  end

  def system(cmd, *args)
    argv = [cmd, *args].map(&:to_s)
    ok = Kernel.system(*argv)
    raise FormulaCheckError, "failed: #{argv.join(' ')}" unless ok
  end

  def shell_output(cmd, status = 0)
    out, st = Open3.capture2(cmd.to_s)
    raise FormulaCheckError, "#{cmd}: exit #{st.exitstatus}, expected #{status}" unless st.exitstatus == status

    out
  end

  def assert_match(pattern, text)
    ok = pattern.is_a?(Regexp) ? pattern.match?(text) : text.include?(pattern.to_s)
    raise FormulaCheckError, "#{pattern.inspect} not found in #{text.inspect}" unless ok
  end
end

def check(formula_path, dist, version)
  load formula_path
  klass = Formula.last_defined or raise FormulaCheckError, "#{formula_path} defines no formula"
  f = klass.fields
  raise FormulaCheckError, "version #{f[:version]}, expected #{version}" unless f[:version] == version
  raise FormulaCheckError, "no test block" unless klass.test_block

  archive = File.join(dist, File.basename(f.fetch(:url)))
  raise FormulaCheckError, "#{f[:url]} names no file of #{dist}" unless File.file?(archive)

  digest = Digest::SHA256.file(archive).hexdigest
  raise FormulaCheckError, "sha256 #{f[:sha256]}, #{archive} has #{digest}" unless f[:sha256] == digest

  Dir.mktmpdir("brew-check") do |tmp|
    src = File.join(tmp, "src")
    FileUtils.mkdir_p(src)
    Kernel.system("tar", "-xzf", archive, "-C", src, exception: true)
    formula = klass.new(File.join(tmp, "prefix"))
    Dir.chdir(src) { formula.install }
    raise FormulaCheckError, "install put no executable sortie in bin" unless File.executable?(formula.bin / "sortie")

    testdir = File.join(tmp, "test")
    FileUtils.mkdir_p(testdir)
    formula.run_test(testdir)
  end
  puts "formula check: #{formula_path}: version #{version}, #{File.basename(archive)} sha256 ok, install and test blocks pass"
end

if ARGV.length != 3
  warn "usage: ruby brew_formula_check.rb FORMULA.rb DIST_DIR VERSION"
  exit 2
end
begin
  check(*ARGV)
rescue FormulaCheckError, KeyError => e
  warn "formula check: #{ARGV[0]}: #{e.message}"
  exit 1
end
