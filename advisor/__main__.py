from advisor.cli import main
import sys
sys.exit(main())
